#include "strata/optim/lr_scheduler.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/tensor/factories.h"

namespace strata::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const Optimizer::Group& g : optimizer.groups()) base_lrs_.push_back(g.lr);
  last_lrs_ = base_lrs_;
}

void LRScheduler::start() {
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(lr_at(last_epoch_, base));
  for (std::size_t g = 0; g < lrs.size(); ++g) optimizer_.set_group_lr(g, lrs[g]);
  last_lrs_ = std::move(lrs);
}

void LRScheduler::step() {
  ++last_epoch_;
  start();
}

nn::StateDict LRScheduler::state_dict() const {
  nn::StateDict dict;
  dict.insert("last_epoch", scalar_tensor(last_epoch_, DType::I64));
  dict.insert("base_lr", scalar_tensor(base_lrs_.front(), DType::F64));
  for (std::size_t g = 1; g < base_lrs_.size(); ++g) {
    dict.insert(fmt::format("base_lr.{}", g), scalar_tensor(base_lrs_[g], DType::F64));
  }
  return dict;
}

void LRScheduler::load_state_dict(const nn::StateDict& dict) {
  std::vector<std::string> keys{"last_epoch", "base_lr"};
  for (std::size_t g = 1; g < base_lrs_.size(); ++g) keys.push_back(fmt::format("base_lr.{}", g));
  bool exact = dict.size() == keys.size();
  for (const std::string& k : keys) exact = exact && dict.contains(k);
  STRATA_CHECK(exact, InvalidArgumentError, "LRScheduler: load_state_dict expects exactly the keys {}",
               fmt::join(keys, ", "));
  const Tensor& epoch_t = dict.at("last_epoch");
  STRATA_CHECK(epoch_t.numel() == 1 && !is_floating(epoch_t.dtype()) && epoch_t.dtype() != DType::Bool,
               InvalidArgumentError, "LRScheduler: last_epoch must be one integer, got shape {} of {}", epoch_t.shape(),
               epoch_t.dtype());
  const int64_t epoch = epoch_t.item<int64_t>();
  // Below the largest int64, so that step() can count on.
  STRATA_CHECK(epoch >= 0 && epoch < std::numeric_limits<int64_t>::max(), InvalidArgumentError,
               "LRScheduler: last_epoch must be >= 0 and below 2^63-1, got {}", epoch);
  std::vector<double> bases;
  for (std::size_t k = 1; k < keys.size(); ++k) {
    const Tensor& base_t = dict.at(keys[k]);
    STRATA_CHECK(base_t.numel() == 1, InvalidArgumentError, "LRScheduler: {} must be one number, got shape {}", keys[k],
                 base_t.shape());
    const double base = base_t.item<double>();
    STRATA_CHECK(base >= 0.0 && std::isfinite(base), InvalidArgumentError,
                 "LRScheduler: {} must be a finite number >= 0, got {}", keys[k], base);
    bases.push_back(base);
  }
  // Checked first, changed after: a refused dict leaves the scheduler as it was.
  const int64_t old_epoch = last_epoch_;
  std::vector<double> old_bases = base_lrs_;
  last_epoch_ = epoch;
  base_lrs_ = std::move(bases);
  try {
    start();
  } catch (const Error&) {
    last_epoch_ = old_epoch;
    base_lrs_ = std::move(old_bases);
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

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  STRATA_CHECK(T_max > 0, InvalidArgumentError, "CosineAnnealingLR: T_max must be positive, got {}", T_max);
  STRATA_CHECK(eta_min >= 0.0 && std::isfinite(eta_min), InvalidArgumentError,
               "CosineAnnealingLR: eta_min must be a finite number >= 0, got {}", eta_min);
  start();
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  const double phase = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr - eta_min_) * (1.0 + std::cos(phase)) / 2.0;
}

}  // namespace strata::optim
