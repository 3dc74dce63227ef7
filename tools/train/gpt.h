#pragma once

// nanoGPT's model (github.com/karpathy/nanoGPT, model.py) in C++: a decoder-only Transformer with pre-norm blocks,
// causal self-attention, an MLP of four times the width with GELU, and the token embedding tied to the output
// layer. Parameter names are nanoGPT's ("transformer.h.0.attn.c_attn.weight"), so its state dicts map one to one.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "strata/nn/layers.h"
#include "strata/tensor/random.h"

namespace strata::train {

struct GptConfig {
  int64_t block_size = 64;  // the longest context
  int64_t vocab_size = 65;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  double dropout = 0.0;
  bool bias = false;  // biases in the linear layers and LayerNorms, as nanoGPT's option
};

/// nanoGPT's LayerNorm: PyTorch's with an optional bias.
class GptLayerNorm : public nn::Module {
 public:
  GptLayerNorm(int64_t width, bool bias);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
};

class CausalSelfAttention : public nn::Module {
 public:
  explicit CausalSelfAttention(const GptConfig& config);
  Tensor forward(const Tensor& x);
  std::shared_ptr<nn::Linear> c_attn, c_proj;

 private:
  int64_t n_head_, n_embd_;
  double dropout_;
};

class GptMlp : public nn::Module {
 public:
  explicit GptMlp(const GptConfig& config);
  Tensor forward(const Tensor& x);
  std::shared_ptr<nn::Linear> c_fc, c_proj;

 private:
  double dropout_;
};

class GptBlock : public nn::Module {
 public:
  explicit GptBlock(const GptConfig& config);
  Tensor forward(const Tensor& x);
  std::shared_ptr<GptLayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<GptMlp> mlp;
};

/// The model. Its weights start as nanoGPT's: N(0, 0.02), the residual projections (c_proj) N(0, 0.02 /
/// sqrt(2 n_layer)), biases 0, LayerNorms 1 and 0; drawn from the CPU's default generator, then moved to `device`.
class Gpt : public nn::Layer {
 public:
  Gpt(const GptConfig& config, Device device);
  /// Token indices [B, T] (i64, T <= block_size) -> logits [B, T, vocab_size].
  Tensor forward(const Tensor& idx) override;
  /// Mean cross-entropy of logits [B, T, V] against the next tokens [B, T].
  static Tensor loss(const Tensor& logits, const Tensor& targets);
  /// Continues each row of `idx` [B, T] by `new_tokens` tokens sampled from softmax(logits / temperature), from the
  /// `top_k` most likely only when set, with `generator`; the context is cropped to the last block_size tokens.
  /// Runs in inference mode and returns [B, T + new_tokens].
  Tensor generate(Tensor idx, int64_t new_tokens, double temperature, std::optional<int64_t> top_k,
                  Generator& generator);
  /// Parameters, each once (the tied embedding counted once), without the position embedding (nanoGPT's count).
  int64_t num_params() const;
  /// AdamW's two groups as nanoGPT's configure_optimizers: every parameter of two or more dimensions decays, the
  /// others (biases, LayerNorm weights) do not.
  std::vector<Tensor> decayed_parameters() const;
  std::vector<Tensor> undecayed_parameters() const;

  const GptConfig config;
  std::shared_ptr<nn::Embedding> wte, wpe;
  std::vector<std::shared_ptr<GptBlock>> h;
  std::shared_ptr<GptLayerNorm> ln_f;
  std::shared_ptr<nn::Linear> lm_head;
};

}  // namespace strata::train
