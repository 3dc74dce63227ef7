#pragma once

// The accumulators of the reduce kernels (backends/portable/reduce_ops.h): one per family of ops, each with
// identity, add (element k of a row), add_run (n elements from position k0), merge (a later partial result) and
// store (the finished value into the output). Compiled for the host and, in .cu files, for the device.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "strata/core/half.h"
#include "strata/kernels/elementwise.h"
#include "strata/ops/reduce_kernels.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

// --- element types, math that compiles for host and device ---

template <typename T>
inline constexpr bool kIsFloating =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// What sums accumulate in: f32 for f16/bf16/f32, f64 for f64, i64 for integers and bool.
template <typename T>
using AccType = std::conditional_t<std::is_same_v<T, double>, double, std::conditional_t<kIsFloating<T>, float, int64_t>>;
/// What comparisons use: f16/bf16 compare as f32, everything else as itself.
template <typename T>
using CompareType = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

namespace math {
template <typename T>
STRATA_HOST_DEVICE inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}
template <typename A>
STRATA_HOST_DEVICE inline A inf() {
  return static_cast<A>(INFINITY);
}
STRATA_HOST_DEVICE inline float exp(float x) { return ::expf(x); }
STRATA_HOST_DEVICE inline double exp(double x) { return ::exp(x); }
STRATA_HOST_DEVICE inline float log(float x) { return ::logf(x); }
STRATA_HOST_DEVICE inline double log(double x) { return ::log(x); }
STRATA_HOST_DEVICE inline float sqrt(float x) { return ::sqrtf(x); }
STRATA_HOST_DEVICE inline double sqrt(double x) { return ::sqrt(x); }
STRATA_HOST_DEVICE inline float abs(float x) { return ::fabsf(x); }
STRATA_HOST_DEVICE inline double abs(double x) { return ::fabs(x); }
STRATA_HOST_DEVICE inline float pow(float x, float y) { return ::powf(x, y); }
STRATA_HOST_DEVICE inline double pow(double x, double y) { return ::pow(x, y); }
}  // namespace math

template <typename Out, typename V>
STRATA_HOST_DEVICE inline void store_as(void* out, int64_t at, V value) {
  static_cast<Out*>(out)[at] = kernels::convert<Out>(value);
}

/// The sum of a contiguous run (of its squares with kSquares) in eight partial sums: independent adds pipeline and
/// vectorise, where one running sum is a chain of dependent adds.
template <typename A, bool kSquares, typename T>
STRATA_HOST_DEVICE A sum_in_lanes(const T* x, int64_t n) {
  A lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const A a = kernels::convert<A>(x[i + j]);
      lane[j] += kSquares ? a * a : a;
    }
  }
  for (; i < n; ++i) {
    const A a = kernels::convert<A>(x[i]);
    lane[0] += kSquares ? a * a : a;
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// --- accumulators: identity, add (element k of the row), add_run (n elements from k0), merge, store ---

/// Sum and mean. Contiguous runs use eight partial sums (sum_in_lanes).
template <typename T>
struct SumAcc {
  using A = AccType<T>;
  A value;

  STRATA_HOST_DEVICE static SumAcc identity(const ops::ReduceParams&) { return {A(0)}; }
  STRATA_HOST_DEVICE void add(T x, int64_t, const ops::ReduceParams&) { value += kernels::convert<A>(x); }
  STRATA_HOST_DEVICE void add_run(const T* x, int64_t n, int64_t stride, int64_t, const ops::ReduceParams&) {
    if (stride != 1) {
      for (int64_t i = 0; i < n; ++i) value += kernels::convert<A>(x[i * stride]);
      return;
    }
    value += sum_in_lanes<A, false>(x, n);
  }
  STRATA_HOST_DEVICE void merge(const SumAcc& o, const ops::ReduceParams&) { value += o.value; }
  STRATA_HOST_DEVICE void store(void* out, int64_t at, int64_t count, const ops::ReduceParams& p) const {
    if constexpr (kIsFloating<T>) {
      store_as<T>(out, at, p.op == ops::ReduceOp::Mean ? value / static_cast<A>(count) : value);
    } else {
      store_as<int64_t>(out, at, value);
    }
  }
};

/// Max, min, argmax, argmin: the extreme value and its first position; a NaN wins and the first NaN stays.
template <typename T>
struct ExtremumAcc {
  using C = CompareType<T>;
  C value;
  int64_t index;  // -1: nothing seen yet

  STRATA_HOST_DEVICE static bool wants_max(const ops::ReduceParams& p) {
    return p.op == ops::ReduceOp::Max || p.op == ops::ReduceOp::ArgMax;
  }
  STRATA_HOST_DEVICE static ExtremumAcc identity(const ops::ReduceParams&) { return {C(0), -1}; }
  // Whether (v, k) replaces the current pick; ties keep the smaller position.
  STRATA_HOST_DEVICE bool beaten_by(C v, int64_t k, const ops::ReduceParams& p) const {
    if (index < 0) return true;
    if (math::is_nan(value)) return math::is_nan(v) && k < index;
    if (math::is_nan(v)) return true;
    if (v == value) return k < index;
    return wants_max(p) ? value < v : v < value;
  }
  STRATA_HOST_DEVICE void add(T x, int64_t k, const ops::ReduceParams& p) {
    const C v = kernels::convert<C>(x);
    if (beaten_by(v, k, p)) {
      value = v;
      index = k;
    }
  }
  STRATA_HOST_DEVICE void add_run(const T* x, int64_t n, int64_t stride, int64_t k0, const ops::ReduceParams& p) {
    for (int64_t i = 0; i < n; ++i) add(x[i * stride], k0 + i, p);
  }
  STRATA_HOST_DEVICE void merge(const ExtremumAcc& o, const ops::ReduceParams& p) {
    if (o.index >= 0 && beaten_by(o.value, o.index, p)) *this = o;
  }
  STRATA_HOST_DEVICE void store(void* out, int64_t at, int64_t, const ops::ReduceParams& p) const {
    if (p.op == ops::ReduceOp::ArgMax || p.op == ops::ReduceOp::ArgMin) {
      store_as<int64_t>(out, at, index);
    } else {
      store_as<T>(out, at, value);
    }
  }
};

/// Variance by Welford's update, partial results merged with Chan's formula.
template <typename T>
struct VarAcc {
  using A = AccType<T>;
  A mean, m2;
  int64_t n;

  STRATA_HOST_DEVICE static VarAcc identity(const ops::ReduceParams&) { return {A(0), A(0), 0}; }
  STRATA_HOST_DEVICE void add(T x, int64_t, const ops::ReduceParams&) {
    const A v = kernels::convert<A>(x);
    ++n;
    const A d = v - mean;
    mean += d / static_cast<A>(n);
    m2 += d * (v - mean);
  }
  STRATA_HOST_DEVICE void add_run(const T* x, int64_t n_run, int64_t stride, int64_t k0,
                                  const ops::ReduceParams& p) {
    for (int64_t i = 0; i < n_run; ++i) add(x[i * stride], k0 + i, p);
  }
  STRATA_HOST_DEVICE void merge(const VarAcc& o, const ops::ReduceParams&) {
    if (o.n == 0) return;
    if (n == 0) {
      *this = o;
      return;
    }
    const A total = static_cast<A>(n + o.n);
    const A d = o.mean - mean;
    const A weight = static_cast<A>(o.n) / total;
    mean += d * weight;
    m2 += o.m2 + d * d * static_cast<A>(n) * weight;
    n += o.n;
  }
  STRATA_HOST_DEVICE void store(void* out, int64_t at, int64_t, const ops::ReduceParams& p) const {
    const double dof = static_cast<double>(n) - p.correction;
    store_as<T>(out, at, m2 / static_cast<A>(dof > 0 ? dof : 0.0));  // 0/0 gives NaN, as in PyTorch
  }
};

/// p-norm: sum |x|^p then the p-th root; inf/-inf are max/min |x|, 0 counts non-zeros.
template <typename T>
struct NormAcc {
  using A = AccType<T>;
  A value;

  STRATA_HOST_DEVICE static bool is_max(const ops::ReduceParams& p) { return p.p == INFINITY; }
  STRATA_HOST_DEVICE static bool is_min(const ops::ReduceParams& p) { return p.p == -INFINITY; }
  STRATA_HOST_DEVICE static NormAcc identity(const ops::ReduceParams& p) {
    return {is_min(p) ? math::inf<A>() : A(0)};
  }
  STRATA_HOST_DEVICE void pick(A a, bool larger) {
    if (!math::is_nan(value) && (math::is_nan(a) || (larger ? value < a : a < value))) value = a;
  }
  STRATA_HOST_DEVICE void add(T x, int64_t, const ops::ReduceParams& p) {
    const A a = math::abs(kernels::convert<A>(x));
    if (is_max(p) || is_min(p)) {
      pick(a, is_max(p));
    } else if (p.p == 0.0) {
      value += a != A(0) ? A(1) : A(0);
    } else if (p.p == 1.0) {
      value += a;
    } else if (p.p == 2.0) {
      value += a * a;
    } else {
      value += math::pow(a, static_cast<A>(p.p));
    }
  }
  STRATA_HOST_DEVICE void add_run(const T* x, int64_t n, int64_t stride, int64_t k0, const ops::ReduceParams& p) {
    if (p.p == 2.0) {
      if (stride == 1) {
        // The common case, in partial sums as SumAcc's: one running sum was one long chain of dependent adds (~7 us
        // of the D2L exercise's ~22 us per 100x100 product and norm on the CPU).
        value += sum_in_lanes<A, true>(x, n);
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        const A a = kernels::convert<A>(x[i * stride]);
        value += a * a;
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i) add(x[i * stride], k0 + i, p);
  }
  STRATA_HOST_DEVICE void merge(const NormAcc& o, const ops::ReduceParams& p) {
    if (is_max(p) || is_min(p)) {
      pick(o.value, is_max(p));
    } else {
      value += o.value;
    }
  }
  STRATA_HOST_DEVICE void store(void* out, int64_t at, int64_t, const ops::ReduceParams& p) const {
    A r = value;
    if (p.p == 2.0) {
      r = math::sqrt(value);
    } else if (!(is_max(p) || is_min(p) || p.p == 0.0 || p.p == 1.0)) {
      r = math::pow(value, static_cast<A>(1.0 / p.p));
    }
    store_as<T>(out, at, r);
  }
};

/// log(sum(exp(x))) as max + log(sum(exp(x - max))), with the running maximum moved along in one pass.
template <typename T>
struct LogSumExpAcc {
  using A = AccType<T>;
  A max, sum;  // max is NaN once a NaN was seen

  STRATA_HOST_DEVICE static LogSumExpAcc identity(const ops::ReduceParams&) { return {-math::inf<A>(), A(0)}; }
  STRATA_HOST_DEVICE void fold(A m, A s) {
    if (math::is_nan(max)) return;
    if (math::is_nan(m)) {
      max = m;
      return;
    }
    if (m == -math::inf<A>()) return;  // contributes exp(-inf) = 0
    if (max < m) {
      sum = sum * math::exp(max - m) + s;
      max = m;
    } else if (max != math::inf<A>()) {  // inf - inf would poison the sum; the result is +inf anyway
      sum += s * math::exp(m - max);
    }
  }
  STRATA_HOST_DEVICE void add(T x, int64_t, const ops::ReduceParams&) { fold(kernels::convert<A>(x), A(1)); }
  STRATA_HOST_DEVICE void add_run(const T* x, int64_t n, int64_t stride, int64_t k0, const ops::ReduceParams& p) {
    for (int64_t i = 0; i < n; ++i) add(x[i * stride], k0 + i, p);
  }
  STRATA_HOST_DEVICE void merge(const LogSumExpAcc& o, const ops::ReduceParams&) { fold(o.max, o.sum); }
  STRATA_HOST_DEVICE A result() const {
    if (math::is_nan(max) || max == -math::inf<A>() || max == math::inf<A>()) return max;
    return max + math::log(sum);
  }
  STRATA_HOST_DEVICE void store(void* out, int64_t at, int64_t, const ops::ReduceParams&) const {
    store_as<T>(out, at, result());
  }
};

/// Elements a CPU item folds into one accumulator before it enters the pairwise cascade.
inline constexpr int64_t kCascadeBlock = 1024;

/// Pairwise merging of consecutive blocks (host only): like a binary counter, level l holds 2^l blocks, so every
/// element passes through O(log n) merges and rounding errors grow with log n instead of n.
template <typename Acc>
struct Cascade {
  static constexpr int kLevels = 48;
  Acc level[kLevels];
  uint64_t blocks = 0;

  void push(Acc block, const ops::ReduceParams& p) {
    int l = 0;
    for (; (blocks >> l) & 1u; ++l) {
      Acc earlier = level[l];
      earlier.merge(block, p);
      block = earlier;
    }
    level[l] = block;
    ++blocks;
  }
  /// The merge of every block pushed, then of `last` (the partly filled block).
  Acc result(const Acc& last, const ops::ReduceParams& p) const {
    Acc r = Acc::identity(p);
    for (int l = kLevels - 1; l >= 0; --l) {
      if ((blocks >> l) & 1u) r.merge(level[l], p);
    }
    r.merge(last, p);
    return r;
  }
};

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
