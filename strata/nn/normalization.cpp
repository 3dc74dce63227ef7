// batch_norm and layer_norm, composed of differentiable reductions and elementwise ops: autograd follows, and the
// same code runs on every device.

#include <algorithm>
#include <utility>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/tensor/functions.h"

namespace strata::nn::functional {

namespace {

/// Every defined argument must live on the input's device (nothing is copied behind the user's back).
void check_device(const char* op, const Tensor& input, const char* name, const Tensor& t) {
  STRATA_CHECK(!t.defined() || t.device() == input.device(), DeviceMismatchError,
               "{}: input is on {} but {} is on {}", op, input.device(), name, t.device());
}

/// A per-channel parameter or statistic must be a vector of C values.
void check_per_channel(const char* op, const char* name, const Tensor& t, int64_t channels, const Shape& input_shape) {
  if (!t.defined()) return;
  STRATA_CHECK(t.dim() == 1 && t.size(0) == channels, ShapeError,
               "{}: {} must have shape [{}] (the channels, dim 1 of input shape {}), got {}", op, name, channels,
               input_shape, t.shape());
  STRATA_CHECK(is_floating(t.dtype()), DTypeError, "{}: {} must be a floating tensor, got {}", op, name, t.dtype());
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  constexpr const char* op = "batch_norm";
  STRATA_CHECK(input.defined(), InvalidArgumentError, "{}: the input tensor is undefined", op);
  STRATA_CHECK(is_floating(input.dtype()), DTypeError, "{}: input must be a floating tensor, got {}", op,
               input.dtype());
  STRATA_CHECK(input.dim() >= 2, ShapeError, "{}: input must be [N, C] or [N, C, ...] with channels in dim 1, got {}",
               op, input.shape());
  STRATA_CHECK(eps >= 0.0, InvalidArgumentError, "{}: eps must be non-negative, got {}", op, eps);
  check_device(op, input, "running_mean", running_mean);
  check_device(op, input, "running_var", running_var);
  check_device(op, input, "weight", weight);
  check_device(op, input, "bias", bias);
  const int64_t channels = input.size(1);
  check_per_channel(op, "running_mean", running_mean, channels, input.shape());
  check_per_channel(op, "running_var", running_var, channels, input.shape());
  check_per_channel(op, "weight", weight, channels, input.shape());
  check_per_channel(op, "bias", bias, channels, input.shape());
  STRATA_CHECK(running_mean.defined() == running_var.defined(), InvalidArgumentError,
               "{}: pass both running_mean and running_var, or neither", op);

  // Per-channel values broadcast as [1, C, 1, ...].
  Shape channel_shape(static_cast<std::size_t>(input.dim()), 1);
  channel_shape[1] = channels;
  const auto per_channel = [&](const Tensor& t) { return t.reshape(channel_shape); };

  Tensor scale, shift;  // y = x * scale + shift, both [1, C, 1, ...]
  if (training) {
    const int64_t count = input.numel() / std::max<int64_t>(channels, 1);
    STRATA_CHECK(count > 1, InvalidArgumentError,
                 "{}: expected more than 1 value per channel when training, got input shape {}", op, input.shape());
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
    const Tensor batch_mean = mean(input, dims, /*keepdim=*/true);
    const Tensor batch_var = var(input, dims, /*unbiased=*/false, /*keepdim=*/true);
    if (running_mean.defined()) {
      NoGradGuard no_grad;
      Tensor rm = running_mean, rv = running_var;
      const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
      rm.copy_(rm * (1.0 - momentum) + batch_mean.reshape({channels}) * momentum);
      rv.copy_(rv * (1.0 - momentum) + batch_var.reshape({channels}) * (momentum * unbias));
    }
    scale = rsqrt(batch_var + eps);
    if (weight.defined()) scale = scale * per_channel(weight);
    shift = -(batch_mean * scale);
  } else {
    STRATA_CHECK(running_mean.defined(), InvalidArgumentError,
                 "{}: inference (training=false) needs running_mean and running_var", op);
    // The running statistics are constants; fold them into the affine map in the input's dtype.
    scale = rsqrt(per_channel(running_var).to(input.dtype()) + eps);
    if (weight.defined()) scale = scale * per_channel(weight);
    shift = -(per_channel(running_mean).to(input.dtype()) * scale);
  }
  if (bias.defined()) shift = shift + per_channel(bias);
  return input * scale + shift;
}

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  constexpr const char* op = "layer_norm";
  STRATA_CHECK(input.defined(), InvalidArgumentError, "{}: the input tensor is undefined", op);
  STRATA_CHECK(is_floating(input.dtype()), DTypeError, "{}: input must be a floating tensor, got {}", op,
               input.dtype());
  STRATA_CHECK(eps >= 0.0, InvalidArgumentError, "{}: eps must be non-negative, got {}", op, eps);
  const int64_t k = normalized_shape.ssize();
  STRATA_CHECK(k > 0, ShapeError, "{}: normalized_shape must name at least one trailing dim", op);
  bool matches = input.dim() >= k;
  for (int64_t i = 0; matches && i < k; ++i) matches = input.size(input.dim() - k + i) == normalized_shape[i];
  STRATA_CHECK(matches, ShapeError, "{}: normalized_shape {} does not match the trailing dims of input shape {}", op,
               normalized_shape, input.shape());
  check_device(op, input, "weight", weight);
  check_device(op, input, "bias", bias);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"weight", &weight}, {"bias", &bias}}) {
    if (!t->defined()) continue;
    STRATA_CHECK(t->shape() == normalized_shape, ShapeError, "{}: {} must have the normalized shape {}, got {}", op,
                 name, normalized_shape, t->shape());
    STRATA_CHECK(is_floating(t->dtype()), DTypeError, "{}: {} must be a floating tensor, got {}", op, name,
                 t->dtype());
  }

  std::vector<int64_t> dims;
  for (int64_t d = input.dim() - k; d < input.dim(); ++d) dims.push_back(d);
  const Tensor mu = mean(input, dims, /*keepdim=*/true);
  const Tensor rstd = rsqrt(var(input, dims, /*unbiased=*/false, /*keepdim=*/true) + eps);
  Tensor out = (input - mu) * rstd;
  if (weight.defined()) out = out * weight;
  if (bias.defined()) out = out + bias;
  return out;
}

}  // namespace strata::nn::functional
