#include "strata/nn/clip_grad.h"

#include <cmath>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::nn::utils {

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  STRATA_CHECK(max_norm >= 0.0 && !std::isnan(max_norm), InvalidArgumentError,
               "clip_grad_norm_: max_norm must be >= 0, got {}", max_norm);
  STRATA_CHECK(norm_type > 0.0 && !std::isnan(norm_type), InvalidArgumentError,
               "clip_grad_norm_: norm_type must be > 0 (or infinity), got {}", norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return scalar_tensor(0.0, DType::F32);
  // Each gradient's norm in f32 on the first gradient's device: gradients on several devices (or in half
  // precision) meet there, and only one number per gradient travels.
  const Device device = grads.front().device();
  const bool inf = std::isinf(norm_type);
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) {
    const Tensor n = inf ? max(abs(g)) : norm(g, norm_type);
    norms.push_back(n.to(device, DType::F32));
  }
  const Tensor all = stack(norms);
  const Tensor total = inf ? max(all) : norm(all, norm_type);
  // min(1, max_norm / (total + eps)) on the device: no host read of the norm.
  const Tensor coef = clamp(max_norm / (total + 1e-6), std::nullopt, 1.0);
  for (Tensor& g : grads) mul_(g, coef.to(g.device(), g.dtype()));
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  STRATA_CHECK(clip_value >= 0.0 && !std::isnan(clip_value), InvalidArgumentError,
               "clip_grad_value_: clip_value must be >= 0, got {}", clip_value);
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    Tensor g = p.grad();
    clamp_(g, -clip_value, clip_value);
  }
}

}  // namespace strata::nn::utils
