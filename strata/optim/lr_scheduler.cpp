#include "strata/optim/lr_scheduler.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "strata/core/error.h"
#include "strata/tensor/factories.h"

namespace strata::optim {

LRScheduler::LRScheduler(Optimizer& optimizer)
    : optimizer_(optimizer), base_lr_(optimizer.lr()), last_lr_(optimizer.lr()) {}

void LRScheduler::start() {
  last_lr_ = lr_at(last_epoch_);
  optimizer_.set_lr(last_lr_);
}

void LRScheduler::step() {
  ++last_epoch_;
  last_lr_ = lr_at(last_epoch_);
  optimizer_.set_lr(last_lr_);
}

nn::StateDict LRScheduler::state_dict() const {
  nn::StateDict dict;
  dict.insert("last_epoch", scalar_tensor(last_epoch_, DType::I64));
  dict.insert("base_lr", scalar_tensor(base_lr_, DType::F64));
  return dict;
}

void LRScheduler::load_state_dict(const nn::StateDict& dict) {
  STRATA_CHECK(dict.contains("last_epoch") && dict.contains("base_lr") && dict.size() == 2, InvalidArgumentError,
               "LRScheduler: load_state_dict expects exactly the keys last_epoch and base_lr");
  const Tensor& epoch_t = dict.at("last_epoch");
  const Tensor& base_t = dict.at("base_lr");
  STRATA_CHECK(epoch_t.numel() == 1 && !is_floating(epoch_t.dtype()) && epoch_t.dtype() != DType::Bool,
               InvalidArgumentError, "LRScheduler: last_epoch must be one integer, got shape {} of {}", epoch_t.shape(),
               epoch_t.dtype());
  STRATA_CHECK(base_t.numel() == 1, InvalidArgumentError, "LRScheduler: base_lr must be one number, got shape {}",
               base_t.shape());
  const int64_t epoch = epoch_t.item<int64_t>();
  const double base = base_t.item<double>();
  // Below the largest int64, so that step() can count on.
  STRATA_CHECK(epoch >= 0 && epoch < std::numeric_limits<int64_t>::max(), InvalidArgumentError,
               "LRScheduler: last_epoch must be >= 0 and below 2^63-1, got {}", epoch);
  STRATA_CHECK(base >= 0.0 && std::isfinite(base), InvalidArgumentError,
               "LRScheduler: base_lr must be a finite number >= 0, got {}", base);
  // Checked first, changed after: a refused dict leaves the scheduler as it was.
  const int64_t old_epoch = last_epoch_;
  const double old_base = base_lr_;
  last_epoch_ = epoch;
  base_lr_ = base;
  try {
    start();
  } catch (const Error&) {
    last_epoch_ = old_epoch;
    base_lr_ = old_base;
    throw;
  }
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  STRATA_CHECK(step_size > 0, InvalidArgumentError, "StepLR: step_size must be positive, got {}", step_size);
  STRATA_CHECK(gamma >= 0.0 && std::isfinite(gamma), InvalidArgumentError,
               "StepLR: gamma must be a finite number >= 0, got {}", gamma);
  start();
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  STRATA_CHECK(T_max > 0, InvalidArgumentError, "CosineAnnealingLR: T_max must be positive, got {}", T_max);
  STRATA_CHECK(eta_min >= 0.0 && std::isfinite(eta_min), InvalidArgumentError,
               "CosineAnnealingLR: eta_min must be a finite number >= 0, got {}", eta_min);
  start();
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  const double phase = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr() - eta_min_) * (1.0 + std::cos(phase)) / 2.0;
}

}  // namespace strata::optim
