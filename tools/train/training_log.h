#pragma once

// strata-train --logdir: the figures of a training run as TensorBoard scalars. A piece the task's loop calls after
// each epoch (Fashion-MNIST's today), so that another task logs the same figures under the same tags.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "shakespeare.h"
#include "strata/core/device.h"
#include "strata/io/summary_writer.h"
#include "trainer.h"

namespace strata::train {

// Note [What --logdir writes]
// Tags, grouped by TensorBoard on the part before the first '/':
//   step/loss, step/lr                      every training step, at its global step (1 for the run's first)
//   epoch/train_loss, epoch/train_accuracy, epoch/test_accuracy, epoch/seconds, epoch/images_per_second
//   memory/peak_mib/<device>                the epoch's peak of allocated memory on the training device
//   transfers/synchronizations, transfers/host_to_device_copies, transfers/device_to_host_copies,
//   transfers/device_to_device_copies      Strata's counters over the epoch's training steps
// The epoch's figures are at the global step of the epoch's last step, so that they line up with step/loss on
// TensorBoard's step axis. The step figures of an epoch are written when it ends: reading a loss every step would
// wait for the device every step (Note [Metrics stay on the device]); so a run killed mid-epoch has the curves up to
// its last whole epoch. With several ranks, rank 0 writes, its own batches' losses.
// The language model (--task shakespeare) writes step/loss and step/lr likewise, and at each evaluation:
//   eval/train_loss, eval/val_loss         the evaluation's losses, at the iterations done (0 for the first)
//   eval/tokens_per_second, memory/peak_mib/<device>, transfers/synchronizations   over the steps since the last
class TrainingLog {
 public:
  /// Opens a new event file in `dir` (created when missing). A directory that cannot be written is refused here,
  /// before any training: InvalidArgumentError naming `option` and the path.
  TrainingLog(const std::filesystem::path& dir, Device device, const std::string& option = "--logdir");
  /// Writes an epoch's figures (and its steps', when the run recorded them) and flushes the file.
  void epoch(const EpochReport& r, int64_t steps_per_epoch);
  /// Writes an evaluation's figures (and its steps') and flushes the file.
  void evaluation(const GptReport& r);
  const std::filesystem::path& file() const { return writer_->file(); }

 private:
  std::unique_ptr<SummaryWriter> writer_;
  std::string device_;
};

}  // namespace strata::train
