#pragma once

// Dynamic loss scaling for f16 training (torch.amp.GradScaler): Note [Loss scaling] in optim/grad_scaler.cpp.

#include <cstdint>
#include <map>

#include "strata/nn/module.h"
#include "strata/optim/optimizer.h"
#include "strata/tensor/tensor.h"

namespace strata::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

/// Scales the loss so that small f16 gradients do not flush to zero, and unscales the gradients before the step,
/// skipping steps whose gradients hold an inf or a NaN. The loop, as PyTorch's:
///   scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update();
/// (with scaler.unscale_(optimizer) before step when the gradients are clipped). Disabled, every call passes
/// through: scale returns the loss, step steps.
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  /// outputs times the current scale.
  Tensor scale(const Tensor& outputs) const;
  /// Divides the optimizer's gradients by the scale, in place, and notes whether any holds an inf or a NaN. Once
  /// per optimizer between updates, and before its step (InvalidArgumentError otherwise).
  void unscale_(optim::Optimizer& optimizer);
  /// Unscales the gradients unless unscale_ did, then runs optimizer.step() unless one held an inf or a NaN.
  /// Returns whether the optimizer stepped.
  bool step(optim::Optimizer& optimizer);
  /// step() without the optimizer's step: unscales unless unscale_ did, and says whether the step should run. For
  /// callers that step the optimizer themselves (Python, where the step may be a Python method).
  bool begin_step(optim::Optimizer& optimizer);
  /// Ends an iteration: the scale times backoff_factor if a step was skipped, else times growth_factor after
  /// growth_interval steps in a row without an inf; or `new_scale` when given. At least one optimizer must have been
  /// unscaled (or stepped) since the last update.
  void update();
  void update(double new_scale);

  double get_scale() const { return options_.enabled ? scale_ : 1.0; }
  int64_t growth_tracker() const { return growth_tracker_; }
  bool is_enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }

  /// scale, growth_factor, backoff_factor, growth_interval and _growth_tracker, as PyTorch's keys, in 0-d f64/i64
  /// tensors; load_state_dict reads them back (a missing key or a disabled scaler is an error naming it).
  nn::StateDict state_dict() const;
  void load_state_dict(const nn::StateDict& dict);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    bool found_inf = false;
  };

  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  std::map<const optim::Optimizer*, PerOptimizer> optimizers_;  // since the last update
};

}  // namespace strata::amp
