#pragma once

#include <cstdint>

#include "strata/nn/module.h"
#include "strata/optim/optimizer.h"

namespace strata::optim {

/// Sets an optimizer's learning rate by epoch: construct it after the optimizer (epoch 0 keeps the optimizer's lr
/// as the base), and call step() once per epoch after the optimizer's steps, as in PyTorch.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;

  /// Advances one epoch and sets the optimizer's learning rate for it.
  void step();
  int64_t last_epoch() const { return last_epoch_; }
  double base_lr() const { return base_lr_; }
  /// The learning rate set by the last step (or the construction).
  double last_lr() const { return last_lr_; }

  /// "last_epoch" (i64 scalar) and "base_lr" (f64 scalar).
  nn::StateDict state_dict() const;
  /// Restores what state_dict() saved and sets the optimizer's learning rate to match.
  void load_state_dict(const nn::StateDict& dict);

 protected:
  /// The learning rate of `epoch`, in closed form.
  virtual double lr_at(int64_t epoch) const = 0;
  /// Subclasses call this at the end of their constructor, when lr_at can run.
  void start();

 private:
  Optimizer& optimizer_;
  double base_lr_;
  int64_t last_epoch_ = 0;
  double last_lr_;
};

/// lr = base_lr * gamma^(epoch / step_size) (integer division): decays by gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  double lr_at(int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace strata::optim
