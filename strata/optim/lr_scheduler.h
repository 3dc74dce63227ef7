#pragma once

#include <cstdint>
#include <vector>

#include "strata/nn/module.h"
#include "strata/optim/optimizer.h"

namespace strata::optim {

/// Sets an optimizer's learning rates by epoch: construct it after the optimizer (epoch 0 keeps each group's lr
/// as that group's base), and call step() once per epoch after the optimizer's steps, as in PyTorch. Every group
/// follows the same schedule from its own base, so the ratios between groups stay as they were.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;

  /// Advances one epoch and sets the optimizer's learning rates for it.
  void step();
  int64_t last_epoch() const { return last_epoch_; }
  /// Group 0's base learning rate.
  double base_lr() const { return base_lrs_.front(); }
  /// Group 0's learning rate set by the last step (or the construction).
  double last_lr() const { return last_lrs_.front(); }
  /// Every group's.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  const std::vector<double>& last_lrs() const { return last_lrs_; }

  /// "last_epoch" (i64 scalar), "base_lr" (f64 scalar, group 0's) and "base_lr.<g>" for each further group g.
  nn::StateDict state_dict() const;
  /// Restores what state_dict() saved and sets the optimizer's learning rate to match.
  void load_state_dict(const nn::StateDict& dict);

 protected:
  /// The learning rate of `epoch` for a group whose base is `base_lr`, in closed form.
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;
  /// Subclasses call this at the end of their constructor, when lr_at can run.
  void start();

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = 0;
  std::vector<double> last_lrs_;
};

/// lr = base_lr * gamma^(epoch / step_size) (integer division): decays by gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace strata::optim
