#pragma once

// Checks that several ops of the tensors layer share.

#include <cstdint>
#include <limits>
#include <utility>

#include "strata/tensor/tensor.h"

namespace strata::detail {

/// Copies src's values into out (broadcast, converted): Tensor::copy_ without autograd, for ops that fill their own
/// new outputs and record their own derivative.
void copy_values(const Tensor& out, const Tensor& src);

/// In-place ops write self, so self must not have elements that share memory (an expanded tensor).
void check_writable(const char* op, const Tensor& self);

/// Whether `other` reads memory of `self` at other positions than self's own elements (a += a.t()).
bool overlaps_elsewhere(const Tensor& self, const Tensor& other);

/// The values an integral dtype (bool included) holds, as a closed range.
inline std::pair<int64_t, int64_t> integral_range(DType dtype) {
  switch (dtype) {
    case DType::Bool: return {0, 1};
    case DType::U8: return {0, 255};
    case DType::I32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

}  // namespace strata::detail
