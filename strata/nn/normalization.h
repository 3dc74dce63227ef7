#pragma once

// layer_norm with a choice of implementation: the fused kernels (what nn/functional.h's layer_norm runs) or the
// composition of tensor ops that the tests compare them with.

#include "strata/tensor/tensor.h"

namespace strata::nn::functional {

/// Which implementation layer_norm runs.
enum class LayerNormImpl {
  kFused,     // one kernel forward and one backward (Note [The layer_norm kernel contract]): the default
  kComposed,  // mean, var, rsqrt, sub, mul and add from the tensor ops, differentiated by autograd: the reference
};

/// functional::layer_norm (nn/functional.h) with the implementation named; the arguments are checked alike.
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps, LayerNormImpl impl);

}  // namespace strata::nn::functional
