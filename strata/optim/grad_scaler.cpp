#include "strata/optim/grad_scaler.h"

#include <cmath>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::amp {

// Note [Loss scaling]
// f16 holds numbers down to 6e-8; many gradients of a network in f16 are smaller and become 0. Multiplying the loss
// by a large scale multiplies every gradient by it, keeping them in range; the step then needs them divided back,
// and a step whose gradients overflowed (an inf or a NaN anywhere) must be skipped, after which the scale halves.
// After growth_interval clean steps it doubles, so it stays near the largest that does not overflow. These are
// PyTorch's rules and defaults (2^16, x2 after 2000, x0.5), so a PyTorch recipe behaves the same.
// The test for an inf or a NaN is the sum of g * 0 over every gradient, which is 0 unless one element is not
// finite (inf * 0 and NaN * 0 are NaN): one reduction per gradient and one read of the result per step, the only
// synchronisation, as PyTorch's step has.

namespace {

void check_options(const GradScalerOptions& o) {
  STRATA_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0.0, InvalidArgumentError,
               "GradScaler: init_scale must be a positive finite number, got {}", o.init_scale);
  STRATA_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1.0, InvalidArgumentError,
               "GradScaler: growth_factor must be greater than 1, got {}", o.growth_factor);
  STRATA_CHECK(o.backoff_factor > 0.0 && o.backoff_factor < 1.0, InvalidArgumentError,
               "GradScaler: backoff_factor must be between 0 and 1, got {}", o.backoff_factor);
  STRATA_CHECK(o.growth_interval > 0, InvalidArgumentError, "GradScaler: growth_interval must be positive, got {}",
               o.growth_interval);
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  check_options(options_);
}

Tensor GradScaler::scale(const Tensor& outputs) const {
  STRATA_CHECK(outputs.defined(), InvalidArgumentError, "GradScaler.scale: the outputs are an undefined tensor");
  if (!options_.enabled) return outputs;
  STRATA_CHECK(is_floating(outputs.dtype()), DTypeError, "GradScaler.scale: the outputs must be floating, got {}",
               outputs.dtype());
  return outputs * scale_;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  PerOptimizer& state = optimizers_[&optimizer];
  STRATA_CHECK(state.stage == Stage::Ready, InvalidArgumentError,
               "GradScaler.unscale_: {} for this {} since the last update()",
               state.stage == Stage::Unscaled ? "already called" : "called after step()", optimizer.name());
  NoGradGuard no_grad;
  const double inverse = 1.0 / scale_;
  Tensor probe;
  for (const Tensor& p : optimizer.params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    STRATA_CHECK(g.dtype() != DType::F16, DTypeError,
                 "GradScaler.unscale_: a gradient is f16; keep the parameters in f32 and let autocast run the "
                 "products in f16 (PyTorch refuses this too)");
    const Tensor zero = sum(g * 0).to(DType::F32);
    probe = probe.defined() ? probe + zero.to(probe.device()) : zero;
    mul_(g, scalar_tensor(inverse, TensorOptions(g.dtype()).device(g.device())));
  }
  state.found_inf = probe.defined() && !std::isfinite(probe.item<float>());
  state.stage = Stage::Unscaled;
}

bool GradScaler::begin_step(optim::Optimizer& optimizer) {
  if (!options_.enabled) return true;
  PerOptimizer& state = optimizers_[&optimizer];
  STRATA_CHECK(state.stage != Stage::Stepped, InvalidArgumentError,
               "GradScaler.step: already called for this {} since the last update()", optimizer.name());
  if (state.stage == Stage::Ready) unscale_(optimizer);
  state.stage = Stage::Stepped;
  return !state.found_inf;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!begin_step(optimizer)) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  STRATA_CHECK(!optimizers_.empty(), InvalidArgumentError,
               "GradScaler.update: no optimizer was unscaled or stepped since the last update()");
  bool found_inf = false;
  for (const auto& [optimizer, state] : optimizers_) found_inf = found_inf || state.found_inf;
  if (found_inf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
  optimizers_.clear();
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled) return;
  STRATA_CHECK(std::isfinite(new_scale) && new_scale > 0.0, InvalidArgumentError,
               "GradScaler.update: new_scale must be a positive finite number, got {}", new_scale);
  scale_ = new_scale;
  optimizers_.clear();
}

nn::StateDict GradScaler::state_dict() const {
  nn::StateDict d;
  if (!options_.enabled) return d;  // as PyTorch's: a disabled scaler saves nothing
  d.insert("scale", scalar_tensor(scale_, TensorOptions(DType::F64)));
  d.insert("growth_factor", scalar_tensor(options_.growth_factor, TensorOptions(DType::F64)));
  d.insert("backoff_factor", scalar_tensor(options_.backoff_factor, TensorOptions(DType::F64)));
  d.insert("growth_interval", scalar_tensor(options_.growth_interval, TensorOptions(DType::I64)));
  d.insert("_growth_tracker", scalar_tensor(growth_tracker_, TensorOptions(DType::I64)));
  return d;
}

void GradScaler::load_state_dict(const nn::StateDict& d) {
  STRATA_CHECK(options_.enabled, InvalidArgumentError,
               "GradScaler.load_state_dict: this scaler is disabled; make it with enabled=true to load a state");
  STRATA_CHECK(!d.empty(), InvalidArgumentError,
               "GradScaler.load_state_dict: the state is empty (saved from a disabled scaler)");
  GradScalerOptions o = options_;
  o.init_scale = d.at("scale").item<double>();
  o.growth_factor = d.at("growth_factor").item<double>();
  o.backoff_factor = d.at("backoff_factor").item<double>();
  o.growth_interval = d.at("growth_interval").item<int64_t>();
  const int64_t tracker = d.at("_growth_tracker").item<int64_t>();
  check_options(o);
  STRATA_CHECK(tracker >= 0 && tracker < o.growth_interval, InvalidArgumentError,
               "GradScaler.load_state_dict: _growth_tracker {} is outside [0, growth_interval {})", tracker,
               o.growth_interval);
  options_ = o;
  scale_ = o.init_scale;
  growth_tracker_ = tracker;
  optimizers_.clear();
}

}  // namespace strata::amp
