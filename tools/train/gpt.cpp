#include "gpt.h"

#include <cmath>
#include <limits>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/nn/init.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::train {

namespace F = nn::functional;

namespace {

// A parent module that keeps its children under dotted names of its own (nanoGPT's ModuleDict "transformer" and
// ModuleList "h"), so that parameter names read as nanoGPT's.
class Container : public nn::Module {
 public:
  Container() : nn::Module("ModuleDict") {}
};

std::shared_ptr<nn::Linear> linear(int64_t in, int64_t out, bool bias, double std) {
  auto layer = std::make_shared<nn::Linear>(nn::LinearOptions(in, out).bias(bias));
  nn::init::normal_(layer->weight, 0.0, std);
  if (bias) nn::init::zeros_(layer->bias);
  return layer;
}

}  // namespace

GptLayerNorm::GptLayerNorm(int64_t width, bool bias) : nn::Module("LayerNorm") {
  weight = register_parameter("weight", ones({width}));
  if (bias) this->bias = register_parameter("bias", zeros({width}));
}

Tensor GptLayerNorm::forward(const Tensor& x) const { return F::layer_norm(x, {weight.size(0)}, weight, bias, 1e-5); }

CausalSelfAttention::CausalSelfAttention(const GptConfig& config)
    : nn::Module("CausalSelfAttention"), n_head_(config.n_head), n_embd_(config.n_embd), dropout_(config.dropout) {
  c_attn = register_module("c_attn", linear(config.n_embd, 3 * config.n_embd, config.bias, 0.02));
  c_proj = register_module("c_proj", linear(config.n_embd, config.n_embd, config.bias,
                                            0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer))));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  const std::vector<Tensor> qkv = split((*c_attn)(x), n_embd_, 2);
  const Shape heads{B, T, n_head_, C / n_head_};
  const Tensor q = qkv[0].view(heads).transpose(1, 2);
  const Tensor k = qkv[1].view(heads).transpose(1, 2);
  const Tensor v = qkv[2].view(heads).transpose(1, 2);
  const Tensor y = F::scaled_dot_product_attention(q, k, v, {}, is_training() ? dropout_ : 0.0, /*is_causal=*/true);
  return F::dropout((*c_proj)(y.transpose(1, 2).contiguous().view({B, T, C})), dropout_, is_training());
}

GptMlp::GptMlp(const GptConfig& config) : nn::Module("MLP"), dropout_(config.dropout) {
  c_fc = register_module("c_fc", linear(config.n_embd, 4 * config.n_embd, config.bias, 0.02));
  c_proj = register_module("c_proj", linear(4 * config.n_embd, config.n_embd, config.bias,
                                            0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer))));
}

Tensor GptMlp::forward(const Tensor& x) { return F::dropout((*c_proj)(gelu((*c_fc)(x))), dropout_, is_training()); }

GptBlock::GptBlock(const GptConfig& config) : nn::Module("Block") {
  ln_1 = register_module("ln_1", std::make_shared<GptLayerNorm>(config.n_embd, config.bias));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(config));
  ln_2 = register_module("ln_2", std::make_shared<GptLayerNorm>(config.n_embd, config.bias));
  mlp = register_module("mlp", std::make_shared<GptMlp>(config));
}

Tensor GptBlock::forward(const Tensor& x) {
  const Tensor y = add(x, attn->forward(ln_1->forward(x)));
  return add(y, mlp->forward(ln_2->forward(y)));
}

Gpt::Gpt(const GptConfig& c, Device device) : nn::Layer("GPT"), config(c) {
  STRATA_CHECK(c.block_size > 0 && c.vocab_size > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0,
               InvalidArgumentError,
               "GPT: block_size ({}), vocab_size ({}), n_layer ({}), n_head ({}) and n_embd ({}) must be positive",
               c.block_size, c.vocab_size, c.n_layer, c.n_head, c.n_embd);
  STRATA_CHECK(c.n_embd % c.n_head == 0, InvalidArgumentError, "GPT: n_embd ({}) must be a multiple of n_head ({})",
               c.n_embd, c.n_head);
  STRATA_CHECK(c.dropout >= 0 && c.dropout < 1, InvalidArgumentError, "GPT: dropout must be in [0, 1), got {}",
               c.dropout);
  auto transformer = register_module("transformer", std::make_shared<Container>());
  wte = transformer->register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd));
  wpe = transformer->register_module("wpe", std::make_shared<nn::Embedding>(c.block_size, c.n_embd));
  nn::init::normal_(wte->weight, 0.0, 0.02);
  nn::init::normal_(wpe->weight, 0.0, 0.02);
  auto blocks = transformer->register_module("h", std::make_shared<Container>());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    h.push_back(blocks->register_module(std::to_string(i), std::make_shared<GptBlock>(c)));
  }
  ln_f = transformer->register_module("ln_f", std::make_shared<GptLayerNorm>(c.n_embd, c.bias));
  lm_head =
      register_module("lm_head", std::make_shared<nn::Linear>(nn::LinearOptions(c.n_embd, c.vocab_size).bias(false)));
  // Weight tying, as nanoGPT's `self.transformer.wte.weight = self.lm_head.weight`: one tensor, one gradient.
  lm_head->replace_parameter("weight", wte->weight);
  to(device);
}

Tensor Gpt::forward(const Tensor& idx) {
  STRATA_CHECK(idx.dim() == 2 && idx.dtype() == DType::I64, InvalidArgumentError,
               "GPT: the input must be i64 token indices [batch, time], got {} {}", idx.dtype(), idx.shape());
  const int64_t T = idx.size(1);
  STRATA_CHECK(T <= config.block_size, InvalidArgumentError,
               "GPT: cannot forward a sequence of length {}: the block size is only {}", T, config.block_size);
  const Tensor pos = arange(0, T, 1, TensorOptions(DType::I64).device(idx.device()));
  Tensor x = F::dropout(add((*wte)(idx), (*wpe)(pos)), config.dropout, is_training());
  for (const auto& block : h) x = block->forward(x);
  return (*lm_head)(ln_f->forward(x));
}

Tensor Gpt::loss(const Tensor& logits, const Tensor& targets) {
  return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

Tensor Gpt::generate(Tensor idx, int64_t new_tokens, double temperature, std::optional<int64_t> top_k,
                     Generator& generator) {
  STRATA_CHECK(temperature > 0 && std::isfinite(temperature), InvalidArgumentError,
               "GPT: the temperature must be a positive number, got {}", temperature);
  STRATA_CHECK(!top_k || *top_k > 0, InvalidArgumentError, "GPT: top_k must be positive, got {}", top_k.value_or(0));
  NoGradGuard no_grad;
  const bool was_training = is_training();
  eval();
  for (int64_t i = 0; i < new_tokens; ++i) {
    const int64_t T = idx.size(1);
    const Tensor context = T <= config.block_size ? idx : idx.narrow(1, T - config.block_size, config.block_size);
    Tensor logits = forward(context).select(1, context.size(1) - 1) / temperature;  // [B, V]
    if (top_k) {
      const auto [values, indices] = topk(logits, std::min(*top_k, logits.size(-1)));
      logits = masked_fill(logits, lt(logits, values.narrow(1, values.size(1) - 1, 1)),
                           -std::numeric_limits<double>::infinity());
    }
    idx = cat({idx, multinomial(softmax(logits, -1), 1, false, &generator)}, 1);
  }
  train(was_training);
  return idx;
}

int64_t Gpt::num_params() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n - wpe->weight.numel();
}

std::vector<Tensor> Gpt::decayed_parameters() const {
  std::vector<Tensor> out;
  for (const Tensor& p : parameters()) {
    if (p.dim() >= 2) out.push_back(p);
  }
  return out;
}

std::vector<Tensor> Gpt::undecayed_parameters() const {
  std::vector<Tensor> out;
  for (const Tensor& p : parameters()) {
    if (p.dim() < 2) out.push_back(p);
  }
  return out;
}

}  // namespace strata::train
