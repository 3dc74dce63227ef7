#include "strata/optim/adam.h"

#include <cmath>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::optim {

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("Adam", {ParamGroup{.params = std::move(params)}}, options, false) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options)
    : Adam("Adam", std::move(groups), options, false) {}

Adam::Adam(const char* name, std::vector<ParamGroup> groups, const AdamOptions& options, bool decoupled)
    : Optimizer(name, std::move(groups), options.lr),
      options_(options),
      weight_decay_(options.weight_decay_.value_or(decoupled ? 0.01 : 0.0)),
      decoupled_(decoupled) {
  STRATA_CHECK(options.beta1_ >= 0.0 && options.beta1_ < 1.0 && options.beta2_ >= 0.0 && options.beta2_ < 1.0,
               InvalidArgumentError, "{}: betas must be in [0, 1), got ({}, {})", name, options.beta1_,
               options.beta2_);
  // Finite as well: an infinite or NaN term turns every parameter into NaN at the first step.
  STRATA_CHECK(options.eps_ >= 0.0 && std::isfinite(options.eps_), InvalidArgumentError,
               "{}: eps must be a finite number >= 0, got {}", name, options.eps_);
  STRATA_CHECK(weight_decay_ >= 0.0 && std::isfinite(weight_decay_), InvalidArgumentError,
               "{}: weight_decay must be a finite number >= 0, got {}", name, weight_decay_);
}

void Adam::step() {
  NoGradGuard no_grad;
  const auto& o = options_;
  for (std::size_t i = 0; i < params().size(); ++i) {
    Tensor p = params()[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    const Group& group = group_of(i);
    const double lr = group.lr;
    const double weight_decay = group.weight_decay.value_or(weight_decay_);
    ParamState& s = state_for(i);
    if (s.tensors.empty()) {
      s.tensors.emplace("exp_avg", zeros_like(p));
      s.tensors.emplace("exp_avg_sq", zeros_like(p));
    }
    Tensor& m = s.tensors.at("exp_avg");
    Tensor& v = s.tensors.at("exp_avg_sq");
    const int64_t t = ++s.step;

    if (weight_decay != 0.0) {
      if (decoupled_) {
        detail::scale_(p, 1.0 - lr * weight_decay);
      } else {
        g = add(g, p, weight_decay);
      }
    }
    detail::scale_(m, o.beta1_);
    add_(m, g, 1.0 - o.beta1_);
    detail::scale_(v, o.beta2_);
    add_(v, g * g, 1.0 - o.beta2_);

    const double bias_correction1 = 1.0 - std::pow(o.beta1_, static_cast<double>(t));
    const double bias_correction2 = 1.0 - std::pow(o.beta2_, static_cast<double>(t));
    const double step_size = lr / bias_correction1;
    Tensor denom = sqrt(v) / std::sqrt(bias_correction2) + o.eps_;
    add_(p, m / denom, -step_size);
  }
}

AdamW::AdamW(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("AdamW", {ParamGroup{.params = std::move(params)}}, options, true) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamOptions& options)
    : Adam("AdamW", std::move(groups), options, true) {}

}  // namespace strata::optim
