#pragma once

// Elementwise kernels written once: the functors below are instantiated by backends/cpu (.cpp, host) and
// backends/cuda (.cu, device). They take TensorViews whose inputs already have the output's shape.

#include <cstdint>
#include <type_traits>

#include "strata/core/error.h"
#include "strata/core/half.h"
#include "strata/core/macros.h"
#include "strata/core/tensor_view.h"
#include "strata/kernels/launch.h"

namespace strata::kernels {

inline constexpr int kMaxDims = 8;

// Everything below is compiled differently by g++ and nvcc: the inline namespace gives the two versions different
// symbol names, so libstrata and the CUDA plugin can never bind to each other's copy.
inline namespace STRATA_KERNEL_NS {

/// Converts between any two element types (f16/bf16 go through f32; bool is "non-zero").
template <typename To, typename From>
STRATA_HOST_DEVICE inline To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(x) != 0.0f;
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(x));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(x));
  } else {
    return static_cast<To>(x);
  }
}

/// n / d for a divisor d fixed in advance, as a multiply-high, an add and a shift (Granlund and Montgomery, as
/// PyTorch's IntDivider). Valid for n and d below 2^31. A GPU has no integer divider: a 64-bit division is a
/// subroutine of dozens of instructions, and a strided kernel paid one per dimension per element.
struct FastDivider {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 0;
  std::uint32_t shift = 0;

  FastDivider() = default;
  explicit FastDivider(std::uint32_t d) : divisor(d) {
    while (shift < 32 && (std::uint64_t{1} << shift) < d) ++shift;
    const std::uint64_t one = 1;
    multiplier = static_cast<std::uint32_t>(((one << 32) * ((one << shift) - d)) / d + 1);
  }
  STRATA_HOST_DEVICE std::uint32_t div(std::uint32_t n) const {
#if defined(STRATA_DEVICE_PASS)
    const std::uint32_t high = __umulhi(n, multiplier);
#else
    const auto high = static_cast<std::uint32_t>((static_cast<std::uint64_t>(n) * multiplier) >> 32);
#endif
    return (high + n) >> shift;
  }
};

/// Maps a linear index over a shape to element offsets in N strided operands; device-copyable.
template <int N>
struct OffsetCalculator {
  int ndim = 0;
  /// Every linear index fits 31 bits (numel < 2^31), so the index arithmetic takes `dividers`.
  bool narrow = false;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
  FastDivider dividers[kMaxDims];

  STRATA_HOST_DEVICE void offsets(int64_t linear, int64_t (&out)[N]) const {
    for (int k = 0; k < N; ++k) out[k] = 0;
    if (narrow) {
      auto rest = static_cast<std::uint32_t>(linear);
      for (int d = ndim - 1; d >= 0; --d) {
        const std::uint32_t quotient = dividers[d].div(rest);
        const int64_t idx = rest - quotient * dividers[d].divisor;
        rest = quotient;
        for (int k = 0; k < N; ++k) out[k] += idx * strides[k][d];
      }
      return;
    }
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t idx = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < N; ++k) out[k] += idx * strides[k][d];
    }
  }
};

/// Builds the calculator for operands of one shape, merging dimensions that are contiguous in every operand.
template <int N>
OffsetCalculator<N> make_offset_calculator(const TensorView* const (&views)[N]) {
  const Shape& shape = views[0]->shape;
  OffsetCalculator<N> calc;
  // Walk from the innermost dim outwards, merging dim d into the current one when strides line up.
  int64_t merged_sizes[kMaxDims + 1];
  int64_t merged_strides[N][kMaxDims + 1];
  int count = 0;
  for (auto d = shape.ssize() - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    bool mergeable = count > 0;
    for (int k = 0; k < N && mergeable; ++k) {
      mergeable = views[k]->strides[d] == merged_strides[k][count - 1] * merged_sizes[count - 1];
    }
    if (mergeable) {
      merged_sizes[count - 1] *= shape[d];
      continue;
    }
    STRATA_CHECK(count < kMaxDims, ShapeError, "kernels support at most {} non-mergeable dimensions, got shape {}",
                 kMaxDims, shape);
    merged_sizes[count] = shape[d];
    for (int k = 0; k < N; ++k) merged_strides[k][count] = views[k]->strides[d];
    ++count;
  }
  calc.ndim = count;
  for (int i = 0; i < count; ++i) {  // back to outermost-first order
    calc.sizes[i] = merged_sizes[count - 1 - i];
    for (int k = 0; k < N; ++k) calc.strides[k][i] = merged_strides[k][count - 1 - i];
  }
  int64_t numel = 1;
  for (int i = 0; i < count; ++i) numel *= calc.sizes[i];
  calc.narrow = numel > 0 && numel < (int64_t{1} << 31);
  if (calc.narrow) {
    for (int i = 0; i < count; ++i) calc.dividers[i] = FastDivider(static_cast<std::uint32_t>(calc.sizes[i]));
  }
  return calc;
}

/// True when all operands are contiguous with the same layout (the fast path: index i everywhere).
template <int N>
bool all_contiguous(const TensorView* const (&views)[N]) {
  for (int k = 0; k < N; ++k) {
    if (!views[k]->is_contiguous()) return false;
  }
  return true;
}

namespace detail {

template <typename Out, typename In, typename F>
struct UnaryContiguous {
  Out* out;
  const In* in;
  F f;
  STRATA_HOST_DEVICE void operator()(int64_t i) const { out[i] = f(in[i]); }
};

template <typename Out, typename In, typename F>
struct UnaryStrided {
  Out* out;
  const In* in;
  OffsetCalculator<2> calc;
  F f;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[2];
    calc.offsets(i, o);
    out[o[0]] = f(in[o[1]]);
  }
};

template <typename Out, typename In>
struct ConvertOp {
  STRATA_HOST_DEVICE Out operator()(In x) const { return convert<Out>(x); }
};

template <typename T>
struct FillContiguous {
  T* out;
  T value;
  STRATA_HOST_DEVICE void operator()(int64_t i) const { out[i] = value; }
};

template <typename T>
struct FillStrided {
  T* out;
  OffsetCalculator<1> calc;
  T value;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[1];
    calc.offsets(i, o);
    out[o[0]] = value;
  }
};

}  // namespace detail

/// out[i] = f(in[i]) over out's shape.
template <typename Out, typename In, typename F>
void unary(const LaunchSite& site, const TensorView& out, const TensorView& in, F f) {
  const TensorView* views[2] = {&out, &in};
  if (all_contiguous(views)) {
    forall(site, out.numel(), detail::UnaryContiguous<Out, In, F>{out.ptr<Out>(), in.ptr<In>(), f});
  } else {
    forall(site, out.numel(),
           detail::UnaryStrided<Out, In, F>{out.ptr<Out>(), in.ptr<In>(), make_offset_calculator(views), f});
  }
}

/// Strided copy with conversion, out and in of one shape.
template <typename Out, typename In>
void copy(const LaunchSite& site, const TensorView& out, const TensorView& in) {
  unary<Out, In>(site, out, in, detail::ConvertOp<Out, In>{});
}

template <typename T>
void fill(const LaunchSite& site, const TensorView& out, T value) {
  const TensorView* views[1] = {&out};
  if (out.is_contiguous()) {
    forall(site, out.numel(), detail::FillContiguous<T>{out.ptr<T>(), value});
  } else {
    forall(site, out.numel(), detail::FillStrided<T>{out.ptr<T>(), make_offset_calculator(views), value});
  }
}

/// Calls Visitor::template run<T>(args...) with the C++ type of dtype. A struct, not a lambda, so that nvcc can
/// compile the kernels it instantiates (extended lambdas may not be nested in generic lambdas).
template <template <typename> class Visitor, typename... Args>
void dispatch(DType dtype, Args&&... args) {
  switch (dtype) {
    case DType::Bool: return Visitor<bool>::run(args...);
    case DType::U8: return Visitor<std::uint8_t>::run(args...);
    case DType::I32: return Visitor<std::int32_t>::run(args...);
    case DType::I64: return Visitor<std::int64_t>::run(args...);
    case DType::F16: return Visitor<Half>::run(args...);
    case DType::BF16: return Visitor<BFloat16>::run(args...);
    case DType::F32: return Visitor<float>::run(args...);
    case DType::F64: return Visitor<double>::run(args...);
  }
}

}  // inline namespace STRATA_KERNEL_NS
}  // namespace strata::kernels
