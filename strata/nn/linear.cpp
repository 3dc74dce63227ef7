// functional::linear (nn/functional.h).

#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/tensor/autocast.h"
#include "strata/tensor/functions.h"

namespace strata::nn::functional {

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  if (auto cast = amp::detail::low_precision_operands({&input, &weight, &bias})) {
    return linear((*cast)[0], (*cast)[1], (*cast)[2]);
  }
  STRATA_CHECK(input.defined() && weight.defined(), InvalidArgumentError,
               "linear: the input and the weight must be defined tensors");
  STRATA_CHECK(weight.dim() == 2, ShapeError, "linear: weight must be 2-D [out_features, in_features], got {}",
               weight.shape());
  STRATA_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(1), ShapeError,
               "linear: the input's last dimension must be in_features = {} (weight {}), got input {}",
               weight.size(1), weight.shape(), input.shape());
  STRATA_CHECK(input.device() == weight.device(), DeviceMismatchError,
               "linear: the input is on {} but the weight is on {}", input.device(), weight.device());
  if (bias.defined()) {
    STRATA_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), ShapeError,
                 "linear: bias must be [out_features] = [{}], got {}", weight.size(0), bias.shape());
    STRATA_CHECK(bias.device() == weight.device(), DeviceMismatchError,
                 "linear: the weight is on {} but the bias is on {}", weight.device(), bias.device());
    // One GEMM with the bias folded in: the common case of a batch of vectors.
    if (input.dim() == 2) return addmm(bias, input, weight.t());
    return add(matmul(input, weight.t()), bias);
  }
  return matmul(input, weight.t());
}

}  // namespace strata::nn::functional
