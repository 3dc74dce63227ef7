#pragma once

// The training job behind strata-train: the reference Fashion-MNIST network, its two recipes, per-epoch
// evaluation, and checkpoints that let a run resume to exactly the result of an uninterrupted one. A library (not
// the main) so that tests/tools/train_test.cpp runs the same code on a few hundred images.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stop_agreement.h"
#include "strata/core/device.h"
#include "strata/data/dataset.h"
#include "strata/dist/ddp.h"
#include "strata/io/file.h"
#include "strata/nn/layers.h"

namespace strata::train {

/// How the network is trained. `Reference` is the fixed recipe (SGD lr 0.01, momentum 0.9, no
/// augmentation), to compare with LibTorch; `Fast` is `make run`'s (Adam with a cosine schedule and light
/// augmentation).
enum class Recipe { Reference, Fast };

struct TrainOptions {
  Recipe recipe = Recipe::Reference;
  int64_t epochs = 3;
  int64_t batch_size = 64;
  /// Learning rate; unset means the recipe's (0.01 for Reference, 0.002 for Fast).
  std::optional<double> lr;
  uint64_t seed = 0;
  Device device = kCPU;
  /// Written at the end of every epoch (atomically) when set, and where a stop request ends the run. The run holds
  /// the lock `<checkpoint>.lock` throughout: a second run on the same file is refused.
  std::optional<std::filesystem::path> checkpoint;
  /// Continue from `checkpoint` when it exists.
  bool resume = false;
  /// Resume even when the settings that decide the result (epochs, lr, batch size, seed, data subset) differ from
  /// the checkpoint's (--resume-with-changes); the result then matches no uninterrupted run.
  bool accept_changes = false;
  /// The ranks that train together (strata-train passes dist::init()'s world); null or a world of one trains alone.
  /// With several ranks: the model is wrapped in DistributedDataParallel, each rank trains on its shard of every
  /// epoch (DistributedSampler) with `batch_size` images per step, the epoch's loss and accuracy are all-reduced, and
  /// rank 0 alone writes the checkpoint (Note [Training on several ranks]).
  dist::ProcessGroup* group = nullptr;
  /// Keep every step's loss and learning rate in the epoch's report (EpochReport::step_losses), for --logdir.
  bool record_steps = false;
};

/// What one epoch did. Loss and accuracy are accumulated on the device and read once, at the end of the epoch.
struct EpochReport {
  int64_t epoch = 0;  // 1-based
  double train_loss = 0;
  double train_accuracy = 0;
  double test_accuracy = 0;
  double seconds = 0;
  double images_per_second = 0;
  int64_t peak_memory_bytes = 0;
  /// Host<->device copies and synchronisations during the epoch (Strata's counters, runtime/transfer.h).
  int64_t synchronizations = 0;
  int64_t host_to_device_copies = 0;
  int64_t device_to_host_copies = 0;
  int64_t device_to_device_copies = 0;
  /// With TrainOptions::record_steps: the loss (this rank's batch mean) and learning rate of each step trained in
  /// this call, which began after `first_step` steps of the epoch (0 but after a mid-epoch resume). The losses stay
  /// on the device until the epoch ends, and are read then with one copy (Note [Metrics stay on the device]), after
  /// the counters above were taken.
  int64_t first_step = 0;
  std::vector<double> step_losses;
  std::vector<double> step_lrs;
};

/// Called after each training step with (step within the epoch, steps per epoch), for a progress bar.
using StepCallback = std::function<void(int64_t step, int64_t steps)>;

/// The reference network: Conv(1->32,3x3,pad 1)-ReLU-MaxPool(2) -> Conv(32->64,3x3,pad 1)-ReLU-MaxPool(2) -> Flatten
/// -> Linear(3136->128)-ReLU -> Linear(128->10), for [N, 1, 28, 28] inputs, freshly initialised on `device`.
std::shared_ptr<nn::Sequential> reference_network(Device device);

/// Floating-point operations of one training step per example of `model` for examples shaped `example` (without the
/// batch dimension), counted from the layers' shapes by one forward pass of a zero example: the multiply-adds of
/// every Conv2d and Linear (nested Sequentials included), 2 FLOPs each, once for the forward pass, once for the
/// weight gradient, and once for the input gradient where the input needs one (every layer after the first with
/// parameters). Everything else is left out (Note [The FLOP floor]).
int64_t training_flops_per_example(nn::Sequential& model, const Shape& example);

/// The reference network with its optimizer and schedule (trainer.cpp).
class Network;

class Trainer {
 public:
  /// `train_set` and `test_set` hold u8 or f32 images [N, 28, 28] and i64 labels in host memory.
  Trainer(TrainOptions options, std::shared_ptr<const data::Dataset> train_set,
          std::shared_ptr<const data::Dataset> test_set);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Epochs already done (after a resume, those of the checkpoint).
  int64_t epochs_done() const { return epochs_done_; }
  /// Steps done in the epoch under way: 0 between epochs, else where a stop request ended it.
  int64_t steps_done() const { return steps_done_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  /// Trains one epoch (or what is left of it after a mid-epoch resume), evaluates, and writes the checkpoint when
  /// one is set. Stop requests wait for run().
  EpochReport run_epoch(const StepCallback& on_step = nullptr) { return *train_epoch(on_step, false); }
  /// Trains until options.epochs are done or a stop is requested.
  std::vector<EpochReport> run(const StepCallback& on_step = nullptr,
                               const std::function<void(const EpochReport&)>& on_epoch = nullptr);
  /// Asks the run to stop after the step under way: the epoch's position, metric sums and optimizer state go to the
  /// checkpoint (when one is set) and run() returns. Safe to call from another thread or a signal handler.
  void request_stop() { stop_requested_.store(true, std::memory_order_relaxed); }
  /// Whether run() ended early on a stop request (rather than after options.epochs).
  bool stopped() const { return stopped_; }
  /// Accuracy on `set` in [0, 1], in inference mode.
  double evaluate(const data::Dataset& set);
  /// The model's parameters and buffers by name, on the training device.
  std::vector<std::pair<std::string, Tensor>> model_state() const;
  const TrainOptions& options() const { return options_; }

 private:
  /// run_epoch(); when `may_stop`, a stop request ends the epoch early, and then it returns nothing.
  std::optional<EpochReport> train_epoch(const StepCallback& on_step, bool may_stop);
  void save_checkpoint() const;
  void load_checkpoint();
  /// The settings that decide the result, as the checkpoint's metadata records them.
  std::map<std::string, std::string> settings() const;
  void check_settings(const std::map<std::string, std::string>& saved, int64_t steps_done) const;
  int world_size() const { return options_.group ? options_.group->size() : 1; }
  int rank() const { return options_.group ? options_.group->rank() : 0; }
  /// This rank's training examples of `epoch`: the whole set alone, its shard of the epoch's order with several.
  std::shared_ptr<const data::Dataset> shard(int64_t epoch) const;
  /// With several ranks, replaces this rank's loss, accuracy and image sums of the epoch by the world's.
  void reduce_epoch_sums();

  TrainOptions options_;
  StopAgreement stop_{options_.group};  // Note [Agreeing to stop without waiting]
  std::shared_ptr<const data::Dataset> train_set_;
  std::shared_ptr<const data::Dataset> test_set_;
  std::unique_ptr<Network> network_;
  std::unique_ptr<dist::DistributedDataParallel> ddp_;  // with several ranks
  std::unique_ptr<io::FileLock> lock_;
  int64_t steps_per_epoch_ = 0;
  int64_t epochs_done_ = 0;
  // Where the epoch under way stands, and its metric sums so far (device tensors).
  int64_t steps_done_ = 0;
  int64_t images_done_ = 0;
  Tensor loss_sum_;
  Tensor correct_;
  static_assert(std::atomic<bool>::is_always_lock_free, "request_stop() must be safe in a signal handler");
  std::atomic<bool> stop_requested_{false};
  bool stopped_ = false;
};

}  // namespace strata::train
