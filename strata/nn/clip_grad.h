#pragma once

// Gradient clipping (torch.nn.utils.clip_grad_norm_ and clip_grad_value_), between backward and the optimizer's
// step. Both work in place on the gradients and never read a value back to the host, so a step does not wait for
// the device.

#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::nn::utils {

/// Scales the gradients of `params` (those that have one) by min(1, max_norm / (total + 1e-6)), where total is the
/// norm_type-norm of all of them together (norm_type may be infinity); returns total before clipping, as a 0-dim
/// tensor on the first gradient's device (0 when no parameter has a gradient).
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);
/// Clamps every gradient of `params` into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace strata::nn::utils
