// dropout: a mask drawn from the device's default generator (seeded, reproducible), applied with a differentiable
// multiply so that backward scales the gradient by the same mask.

#include <cmath>

#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::nn::functional {

Tensor dropout(const Tensor& input, double p, bool training) {
  constexpr const char* op = "dropout";
  STRATA_CHECK(input.defined(), InvalidArgumentError, "{}: the input tensor is undefined", op);
  STRATA_CHECK(p >= 0.0 && p <= 1.0, InvalidArgumentError, "{}: p must be in [0, 1], got {}", op, p);
  STRATA_CHECK(is_floating(input.dtype()), DTypeError, "{}: input must be a floating tensor, got {}", op,
               input.dtype());
  if (!training || p == 0.0) return input;
  const Device device = input.device();
  // Everything dropped, as in PyTorch (the mask below would scale by 1 / 0).
  if (p == 1.0) return input * scalar_tensor(0.0, TensorOptions(input.dtype()).device(device));
  // Uniforms in f32 whatever the input's dtype, so a seed gives the same mask for f16, f32 and f64 inputs.
  const Tensor keep = ge(rand(input.shape(), TensorOptions(DType::F32).device(device)),
                         scalar_tensor(p, TensorOptions(DType::F32).device(device)));
  const TensorOptions like = TensorOptions(input.dtype()).device(device);
  const Tensor mask = where(keep, scalar_tensor(1.0 / (1.0 - p), like), scalar_tensor(0.0, like));
  return input * mask;
}

}  // namespace strata::nn::functional
