#include "strata/optim/lr_scheduler.h"

#include <cmath>
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
  const int64_t epoch = dict.at("last_epoch").item<int64_t>();
  const double base = dict.at("base_lr").item<double>();
  STRATA_CHECK(epoch >= 0, InvalidArgumentError, "LRScheduler: last_epoch must be >= 0, got {}", epoch);
  last_epoch_ = epoch;
  base_lr_ = base;
  start();
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  STRATA_CHECK(step_size > 0, InvalidArgumentError, "StepLR: step_size must be positive, got {}", step_size);
  start();
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  STRATA_CHECK(T_max > 0, InvalidArgumentError, "CosineAnnealingLR: T_max must be positive, got {}", T_max);
  start();
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  const double phase = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr() - eta_min_) * (1.0 + std::cos(phase)) / 2.0;
}

}  // namespace strata::optim
