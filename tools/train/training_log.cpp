#include "training_log.h"

#include <fmt/format.h>

#include "strata/core/error.h"

namespace strata::train {

TrainingLog::TrainingLog(const std::filesystem::path& dir, Device device, const std::string& option)
    : device_(fmt::format("{}", device)) {
  try {
    writer_ = std::make_unique<SummaryWriter>(dir);
  } catch (const IOError& e) {
    STRATA_THROW(InvalidArgumentError, "{} '{}' cannot be written: {}", option, dir.string(), e.what());
  }
}

void TrainingLog::epoch(const EpochReport& r, int64_t steps_per_epoch) {
  const int64_t first = (r.epoch - 1) * steps_per_epoch + r.first_step;  // steps done before this report's
  for (std::size_t i = 0; i < r.step_losses.size(); ++i) {
    const int64_t step = first + static_cast<int64_t>(i) + 1;
    writer_->add_scalar("step/loss", r.step_losses[i], step);
    writer_->add_scalar("step/lr", r.step_lrs.at(i), step);
  }
  const int64_t step = r.epoch * steps_per_epoch;
  writer_->add_scalar("epoch/train_loss", r.train_loss, step);
  writer_->add_scalar("epoch/train_accuracy", r.train_accuracy, step);
  writer_->add_scalar("epoch/test_accuracy", r.test_accuracy, step);
  writer_->add_scalar("epoch/seconds", r.seconds, step);
  writer_->add_scalar("epoch/images_per_second", r.images_per_second, step);
  writer_->add_scalar("memory/peak_mib/" + device_, static_cast<double>(r.peak_memory_bytes) / (1 << 20), step);
  writer_->add_scalar("transfers/synchronizations", static_cast<double>(r.synchronizations), step);
  writer_->add_scalar("transfers/host_to_device_copies", static_cast<double>(r.host_to_device_copies), step);
  writer_->add_scalar("transfers/device_to_host_copies", static_cast<double>(r.device_to_host_copies), step);
  writer_->add_scalar("transfers/device_to_device_copies", static_cast<double>(r.device_to_device_copies), step);
  writer_->flush();
}

void TrainingLog::evaluation(const GptReport& r) {
  for (std::size_t i = 0; i < r.step_losses.size(); ++i) {
    const int64_t step = r.first_step + static_cast<int64_t>(i) + 1;
    writer_->add_scalar("step/loss", r.step_losses[i], step);
    writer_->add_scalar("step/lr", r.step_lrs.at(i), step);
  }
  writer_->add_scalar("eval/train_loss", r.train_loss, r.iter);
  writer_->add_scalar("eval/val_loss", r.val_loss, r.iter);
  if (r.iter > r.first_step) {  // steps were trained since the last evaluation
    writer_->add_scalar("eval/tokens_per_second", r.tokens_per_second, r.iter);
    writer_->add_scalar("memory/peak_mib/" + device_, static_cast<double>(r.peak_memory_bytes) / (1 << 20), r.iter);
    writer_->add_scalar("transfers/synchronizations", static_cast<double>(r.synchronizations), r.iter);
  }
  writer_->flush();
}

}  // namespace strata::train
