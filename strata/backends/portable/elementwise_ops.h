#pragma once

// Elementwise ops written once: the math of each op is a functor (elementwise_math.h), the loops below apply it
// to strided operands on any device. Instantiated by backends/cpu/elementwise_ops.cpp (host) and by
// backends/cuda/elementwise_*.cu, a family each (device; Note [Elementwise families]). Operands arrive promoted
// and broadcast (ops/elementwise_kernels.h).
//
// Note [Elementwise loops]
// On a GPU (kernels::forall) a thread takes kPack consecutive elements of contiguous operands, read and written as
// one aligned vector when every pointer allows it (one 16-byte access per f32 operand instead of four). Of strided
// operands a thread takes kPack elements too: when every operand's rows have unit stride and hold a multiple of
// kPack elements, outer strides and pointers aligned (a bias row added to a batch, a slice of whole rows), kPack
// consecutive elements of one row, with one offset computation and one vector access per operand; otherwise the
// elements t, t + T, t + 2T, ... of the T threads, so that a warp still touches neighbouring elements, each with
// the offsets that OffsetCalculator gives. On the CPU a thread takes a range: contiguous
// operands run one plain loop over local pointers that the compiler vectorises (a per-index functor would reload its
// pointers after every one-byte store, which may alias them), and strided operands are walked row by row with an
// odometer, so the divisions of OffsetCalculator are paid once per row and rows with unit or zero inner strides (bias
// rows, broadcast scalars) vectorise too.

#include <cstdint>
#include <type_traits>
#include <utility>

#include "strata/backends/portable/elementwise_math.h"
#include "strata/backends/portable/launch_site.h"
#include "strata/kernels/elementwise.h"
#include "strata/ops/elementwise_kernels.h"
#include "strata/runtime/parallel.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

// ---------------------------------------------------------------------------------------------- loops ----

/// Calls row(offsets, count) for each run of consecutive innermost elements among the linear indices [begin, end)
/// of calc's shape; `offsets` are those of the run's first element in each operand.
template <int N, typename Row>
void for_each_row(const kernels::OffsetCalculator<N>& calc, int64_t begin, int64_t end, const Row& row) {
  int64_t off[N] = {};
  if (calc.ndim == 0) {  // every dimension has size 1: a single element
    row(off, end - begin);
    return;
  }
  const int last = calc.ndim - 1;
  int64_t idx[kernels::kMaxDims];
  int64_t rest = begin;
  for (int d = last; d >= 0; --d) {
    idx[d] = rest % calc.sizes[d];
    rest /= calc.sizes[d];
    for (int k = 0; k < N; ++k) off[k] += idx[d] * calc.strides[k][d];
  }
  while (begin < end) {
    const int64_t count = std::min(end - begin, calc.sizes[last] - idx[last]);
    row(off, count);
    begin += count;
    if (begin == end) break;
    idx[last] += count;
    for (int k = 0; k < N; ++k) off[k] += count * calc.strides[k][last];
    for (int d = last; d > 0 && idx[d] == calc.sizes[d]; --d) {  // carry into the outer dimensions
      for (int k = 0; k < N; ++k) off[k] += calc.strides[k][d - 1] - idx[d] * calc.strides[k][d];
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

template <int N>
int innermost(const kernels::OffsetCalculator<N>& calc) {
  return calc.ndim > 0 ? calc.ndim - 1 : 0;
}

/// Consecutive elements per GPU thread on contiguous operands.
inline constexpr int kPack = 4;

template <typename T>
struct alignas(sizeof(T) * kPack) Pack {
  T v[kPack];
};

/// Whether every pointer is aligned for Pack loads and stores.
template <typename... T>
bool packable(const T*... p) {
  return ((reinterpret_cast<std::uintptr_t>(p) % alignof(Pack<T>) == 0) && ...);
}

/// Whether kPack consecutive elements from any multiple of kPack lie in one row of every strided operand, aligned
/// for Pack access: unit inner strides, rows of a multiple of kPack elements, outer strides that are multiples of
/// kPack, aligned pointers (Note [Elementwise loops]).
template <int N, typename... T>
bool rows_packable(const kernels::OffsetCalculator<N>& calc, const T*... p) {
  if (calc.ndim == 0 || calc.sizes[calc.ndim - 1] % kPack != 0 || !packable(p...)) return false;
  for (int k = 0; k < N; ++k) {
    if (calc.strides[k][calc.ndim - 1] != 1) return false;
    for (int d = 0; d + 1 < calc.ndim; ++d) {
      if (calc.strides[k][d] % kPack != 0) return false;
    }
  }
  return true;
}

/// Threads of a GPU loop that takes kPack elements per thread.
STRATA_HOST_DEVICE inline int64_t pack_threads(int64_t n) { return (n + kPack - 1) / kPack; }

template <typename Out, typename In, typename Op>
struct UnaryLoop {
  static constexpr int kPerThread = kPack;
  Out* out;
  const In* in;
  Op op;
  int64_t n;
  bool packed;
  STRATA_HOST_DEVICE void operator()(int64_t t) const {  // elements [kPack t, kPack t + kPack)
    const int64_t i = t * kPack;
    if (packed && i + kPack <= n) {
      const Pack<In> x = *reinterpret_cast<const Pack<In>*>(in + i);
      Pack<Out> r;
      for (int k = 0; k < kPack; ++k) r.v[k] = static_cast<Out>(op(OpMath<In>(x.v[k])));
      *reinterpret_cast<Pack<Out>*>(out + i) = r;
    } else {
      for (int64_t k = i; k < n && k < i + kPack; ++k) out[k] = static_cast<Out>(op(OpMath<In>(in[k])));
    }
  }
  void range(int64_t begin, int64_t end) const {
    Out* o = out;
    const In* x = in;
    const Op f = op;
    for (int64_t i = begin; i < end; ++i) o[i] = static_cast<Out>(f(OpMath<In>(x[i])));
  }
};

template <typename Out, typename In, typename Op>
struct UnaryStridedLoop {
  static constexpr int kPerThread = kPack;
  Out* out;
  const In* in;
  kernels::OffsetCalculator<2> calc;
  Op op;
  int64_t n;
  bool packed_rows;  // rows_packable
  STRATA_HOST_DEVICE void operator()(int64_t t) const {
    int64_t o[2];
    if (packed_rows) {  // elements [kPack t, kPack t + kPack), in one row
      calc.offsets(t * kPack, o);
      const Pack<In> x = *reinterpret_cast<const Pack<In>*>(in + o[1]);
      Pack<Out> r;
      for (int k = 0; k < kPack; ++k) r.v[k] = static_cast<Out>(op(OpMath<In>(x.v[k])));
      *reinterpret_cast<Pack<Out>*>(out + o[0]) = r;
      return;
    }
    const int64_t threads = pack_threads(n);
    for (int64_t i = t; i < n && i < t + kPack * threads; i += threads) {
      calc.offsets(i, o);
      out[o[0]] = static_cast<Out>(op(OpMath<In>(in[o[1]])));
    }
  }
  void range(int64_t begin, int64_t end) const {
    const int last = innermost(calc);
    const int64_t so = calc.strides[0][last], sx = calc.strides[1][last];
    for_each_row(calc, begin, end, [&](const int64_t(&off)[2], int64_t n) {
      Out* o = out + off[0];
      const In* x = in + off[1];
      const Op f = op;
      if (so == 1 && sx == 1) {
        for (int64_t k = 0; k < n; ++k) o[k] = static_cast<Out>(f(OpMath<In>(x[k])));
      } else {
        for (int64_t k = 0; k < n; ++k) o[k * so] = static_cast<Out>(f(OpMath<In>(x[k * sx])));
      }
    });
  }
};

template <typename Out, typename In, typename Op>
struct BinaryLoop {
  using M = OpMath<In>;
  static constexpr int kPerThread = kPack;
  Out* out;
  const In* a;
  const In* b;
  Op op;
  int64_t n;
  bool packed;
  STRATA_HOST_DEVICE void operator()(int64_t t) const {  // elements [kPack t, kPack t + kPack)
    const int64_t i = t * kPack;
    if (packed && i + kPack <= n) {
      const Pack<In> x = *reinterpret_cast<const Pack<In>*>(a + i);
      const Pack<In> y = *reinterpret_cast<const Pack<In>*>(b + i);
      Pack<Out> r;
      for (int k = 0; k < kPack; ++k) r.v[k] = static_cast<Out>(op(M(x.v[k]), M(y.v[k])));
      *reinterpret_cast<Pack<Out>*>(out + i) = r;
    } else {
      for (int64_t k = i; k < n && k < i + kPack; ++k) out[k] = static_cast<Out>(op(M(a[k]), M(b[k])));
    }
  }
  void range(int64_t begin, int64_t end) const {
    Out* o = out;
    const In* x = a;
    const In* y = b;
    const Op f = op;
    for (int64_t i = begin; i < end; ++i) o[i] = static_cast<Out>(f(OpMath<In>(x[i]), OpMath<In>(y[i])));
  }
};

template <typename Out, typename In, typename Op>
struct BinaryStridedLoop {
  using M = OpMath<In>;
  static constexpr int kPerThread = kPack;
  Out* out;
  const In* a;
  const In* b;
  kernels::OffsetCalculator<3> calc;
  Op op;
  int64_t n;
  bool packed_rows;  // rows_packable
  STRATA_HOST_DEVICE void operator()(int64_t t) const {
    int64_t o[3];
    if (packed_rows) {  // elements [kPack t, kPack t + kPack), in one row
      calc.offsets(t * kPack, o);
      const Pack<In> x = *reinterpret_cast<const Pack<In>*>(a + o[1]);
      const Pack<In> y = *reinterpret_cast<const Pack<In>*>(b + o[2]);
      Pack<Out> r;
      for (int k = 0; k < kPack; ++k) r.v[k] = static_cast<Out>(op(M(x.v[k]), M(y.v[k])));
      *reinterpret_cast<Pack<Out>*>(out + o[0]) = r;
      return;
    }
    const int64_t threads = pack_threads(n);
    for (int64_t i = t; i < n && i < t + kPack * threads; i += threads) {
      calc.offsets(i, o);
      out[o[0]] = static_cast<Out>(op(M(a[o[1]]), M(b[o[2]])));
    }
  }
  void range(int64_t begin, int64_t end) const {
    const int last = innermost(calc);
    const int64_t so = calc.strides[0][last], sx = calc.strides[1][last], sy = calc.strides[2][last];
    for_each_row(calc, begin, end, [&](const int64_t(&off)[3], int64_t n) {
      Out* o = out + off[0];
      const In* x = a + off[1];
      const In* y = b + off[2];
      const Op f = op;
      if (so == 1 && sx == 1 && sy == 1) {
        for (int64_t k = 0; k < n; ++k) o[k] = static_cast<Out>(f(M(x[k]), M(y[k])));
      } else if (so == 1 && sx == 1 && sy == 0) {  // b broadcast along the row
        const M yv = M(*y);
        for (int64_t k = 0; k < n; ++k) o[k] = static_cast<Out>(f(M(x[k]), yv));
      } else if (so == 1 && sx == 0 && sy == 1) {  // a broadcast along the row
        const M xv = M(*x);
        for (int64_t k = 0; k < n; ++k) o[k] = static_cast<Out>(f(xv, M(y[k])));
      } else {
        for (int64_t k = 0; k < n; ++k) o[k * so] = static_cast<Out>(f(M(x[k * sx]), M(y[k * sy])));
      }
    });
  }
};

template <typename T>
struct WhereLoop {
  static constexpr int kPerThread = 1;
  T* out;
  const bool* cond;
  const T* a;
  const T* b;
  kernels::OffsetCalculator<4> calc;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[4];
    calc.offsets(i, o);
    out[o[0]] = cond[o[1]] ? a[o[2]] : b[o[3]];
  }
  void range(int64_t begin, int64_t end) const {
    const int last = innermost(calc);
    const int64_t s0 = calc.strides[0][last], s1 = calc.strides[1][last], s2 = calc.strides[2][last],
                  s3 = calc.strides[3][last];
    for_each_row(calc, begin, end, [&](const int64_t(&off)[4], int64_t n) {
      T* o = out + off[0];
      const bool* c = cond + off[1];
      const T* x = a + off[2];
      const T* y = b + off[3];
      if (s0 == 1 && s1 == 1 && s2 == 1 && s3 == 1) {
        for (int64_t k = 0; k < n; ++k) o[k] = c[k] ? x[k] : y[k];
      } else {
        for (int64_t k = 0; k < n; ++k) o[k * s0] = c[k * s1] ? x[k * s2] : y[k * s3];
      }
    });
  }
};

/// masked_fill: out = mask ? value : in, with the value held by the functor (never in device memory).
template <typename T>
struct MaskedFillLoop {
  static constexpr int kPerThread = 1;
  T* out;
  const T* in;
  const bool* mask;
  T value;
  kernels::OffsetCalculator<3> calc;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[3];
    calc.offsets(i, o);
    out[o[0]] = mask[o[2]] ? value : in[o[1]];
  }
  void range(int64_t begin, int64_t end) const {
    const int last = innermost(calc);
    const int64_t s0 = calc.strides[0][last], s1 = calc.strides[1][last], s2 = calc.strides[2][last];
    for_each_row(calc, begin, end, [&](const int64_t(&off)[3], int64_t n) {
      T* o = out + off[0];
      const T* x = in + off[1];
      const bool* m = mask + off[2];
      if (s0 == 1 && s1 == 1 && s2 == 1) {
        for (int64_t k = 0; k < n; ++k) o[k] = m[k] ? value : x[k];
      } else {
        for (int64_t k = 0; k < n; ++k) o[k * s0] = m[k * s2] ? value : x[k * s1];
      }
    });
  }
};

/// triu/tril: keeps in's element (i, j) of the last two dims where j - i is on the kept side of `diagonal`.
template <typename T>
struct TriangleLoop {
  static constexpr int kPerThread = 1;
  T* out;
  const T* in;
  kernels::OffsetCalculator<2> calc;
  int64_t rows, cols, diagonal;
  bool upper;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[2];
    calc.offsets(i, o);
    const int64_t j = i % cols, r = (i / cols) % rows;
    const bool keep = upper ? j - r >= diagonal : j - r <= diagonal;
    out[o[0]] = keep ? in[o[1]] : kernels::convert<T>(0);
  }
  void range(int64_t begin, int64_t end) const {
    for (int64_t i = begin; i < end; ++i) (*this)(i);
  }
};

/// Elements below which the CPU runs a loop inline rather than waking the pool; costly ops split sooner.
template <typename Op>
constexpr int64_t cpu_grain() {
  if constexpr (requires { Op::kCostly; }) {
    if constexpr (Op::kCostly) return 4096;
  }
  return kernels::kCpuGrain;
}

/// Runs a loop over n elements: Loop::kPerThread of them per GPU thread, or ranges of them on the CPU pool
/// (Note [Elementwise loops]).
template <typename Op, typename Loop>
void run(const kernels::LaunchSite& site, int64_t n, const Loop& loop) {
#if defined(STRATA_GPU_COMPILER)
  kernels::forall(site, (n + Loop::kPerThread - 1) / Loop::kPerThread, loop);
#else
  if (!site.device.is_cpu()) kernels::detail::throw_host_only(site);
  constexpr int64_t grain = cpu_grain<Op>();
  if (n < 2 * grain) {
    loop.range(0, n);
  } else {
    parallel_for(n, grain, [&loop](int64_t begin, int64_t end) { loop.range(begin, end); });
  }
#endif
}

/// The stored type of an op's result: bool for predicates, else the operand type.
template <typename T, typename Result>
using OutOf = std::conditional_t<std::is_same_v<Result, bool>, bool, T>;

template <typename T, typename Op>
void apply_unary(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in, const Op& op) {
  using Out = OutOf<T, decltype(op(std::declval<OpMath<T>>()))>;
  const TensorView* views[2] = {&out, &in};
  const int64_t n = out.numel();
  if (kernels::all_contiguous(views)) {
    Out* o = out.ptr<Out>();
    const T* x = in.ptr<T>();
    run<Op>(site, n, UnaryLoop<Out, T, Op>{o, x, op, n, packable(o, x)});
  } else {
    Out* o = out.ptr<Out>();
    const T* x = in.ptr<T>();
    const auto calc = kernels::make_offset_calculator(views);
    run<Op>(site, n, UnaryStridedLoop<Out, T, Op>{o, x, calc, op, n, rows_packable(calc, o, x)});
  }
}

template <typename T, typename Op>
void apply_binary(const kernels::LaunchSite& site, const TensorView& out, const TensorView& a, const TensorView& b,
                  const Op& op) {
  using Out = OutOf<T, decltype(op(std::declval<OpMath<T>>(), std::declval<OpMath<T>>()))>;
  const TensorView* views[3] = {&out, &a, &b};
  const int64_t n = out.numel();
  if (kernels::all_contiguous(views)) {
    Out* o = out.ptr<Out>();
    const T *x = a.ptr<T>(), *y = b.ptr<T>();
    run<Op>(site, n, BinaryLoop<Out, T, Op>{o, x, y, op, n, packable(o, x, y)});
  } else {
    Out* o = out.ptr<Out>();
    const T *x = a.ptr<T>(), *y = b.ptr<T>();
    const auto calc = kernels::make_offset_calculator(views);
    run<Op>(site, n, BinaryStridedLoop<Out, T, Op>{o, x, y, calc, op, n, rows_packable(calc, o, x, y)});
  }
}

[[noreturn]] inline void unsupported_dtype(const kernels::LaunchSite& site, DType dtype) {
  STRATA_THROW(DTypeError, "{}: the kernel has no implementation for {} (the tensors layer should have rejected it)",
               site.op, dtype);
}

// ------------------------------------------------------------------------------------- kernel entries ----

/// UnaryFn for Op<T> (out = op(in)), dispatched on the input dtype.
template <template <typename> class Op>
struct Unary {
  template <typename T>
  struct Visit {
    static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in) {
      if constexpr (Op<T>::kSupported)
        apply_unary<T>(site, out, in, Op<T>{});
      else
        unsupported_dtype(site, in.dtype);
    }
  };
  static void kernel(const ops::OpCall& call, const TensorView& out, const TensorView& in) {
    kernels::dispatch<Visit>(in.dtype, site_of(call, call.op), out, in);
  }
};

/// BinaryFn for Op<T> (out = op(a, b)), dispatched on the inputs' dtype.
template <template <typename> class Op>
struct Binary {
  template <typename T>
  struct Visit {
    static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& a, const TensorView& b) {
      if constexpr (Op<T>::kSupported)
        apply_binary<T>(site, out, a, b, Op<T>{});
      else
        unsupported_dtype(site, a.dtype);
    }
  };
  static void kernel(const ops::OpCall& call, const TensorView& out, const TensorView& a, const TensorView& b) {
    kernels::dispatch<Visit>(a.dtype, site_of(call, call.op), out, a, b);
  }
};

/// AddFn: out = a + alpha * b; alpha == 1 takes the plain sum.
template <typename T>
struct AddVisit {
  static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& a, const TensorView& b,
                  const Scalar& alpha) {
    if (alpha.to_double() == 1.0)
      apply_binary<T>(site, out, a, b, AddOp<T>{});
    else
      apply_binary<T>(site, out, a, b, AddAlphaOp<T>{alpha.to<OpMath<T>>()});
  }
};
inline void add_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& a, const TensorView& b,
                       const Scalar& alpha) {
  kernels::dispatch<AddVisit>(a.dtype, site_of(call, call.op), out, a, b, alpha);
}

/// ScalarFn for Op<T> with the scalar, converted to the compute type, on the right (a op s) or the left (s op a).
template <template <typename> class Op, bool kScalarFirst>
struct WithScalar {
  template <typename T>
  struct Visit {
    static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& a, const Scalar& s) {
      using M = OpMath<T>;
      if constexpr (!Op<T>::kSupported)
        unsupported_dtype(site, a.dtype);
      else if constexpr (kScalarFirst)
        apply_unary<T>(site, out, a, BindFirst<Op<T>, M>{{}, s.to<M>()});
      else
        apply_unary<T>(site, out, a, BindSecond<Op<T>, M>{{}, s.to<M>()});
    }
  };
  static void kernel(const ops::OpCall& call, const TensorView& out, const TensorView& a, const Scalar& s) {
    kernels::dispatch<Visit>(a.dtype, site_of(call, call.op), out, a, s);
  }
};

/// ScalarFn for pow with a scalar exponent; squaring, the common case, is a multiplication.
template <typename T>
struct PowScalarVisit {
  static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& a, const Scalar& e) {
    using M = OpMath<T>;
    if constexpr (!PowOp<T>::kSupported)
      unsupported_dtype(site, a.dtype);
    else if (e.to_double() == 2.0)
      apply_unary<T>(site, out, a, SquareOp<T>{});
    else
      apply_unary<T>(site, out, a, BindSecond<PowOp<T>, M>{{}, e.to<M>()});
  }
};
inline void pow_scalar_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& a, const Scalar& e) {
  kernels::dispatch<PowScalarVisit>(a.dtype, site_of(call, call.op), out, a, e);
}

template <typename T>
struct ClampVisit {
  static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in,
                  const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
    if constexpr (ClampOp<T>::kSupported)
      apply_unary<T>(site, out, in, ClampOp<T>::make(lo, hi));
    else
      unsupported_dtype(site, in.dtype);
  }
};
inline void clamp_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& in,
                         const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  kernels::dispatch<ClampVisit>(in.dtype, site_of(call, call.op), out, in, lo, hi);
}

template <typename T>
struct WhereVisit {
  static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& cond, const TensorView& a,
                  const TensorView& b) {
    const TensorView* views[4] = {&out, &cond, &a, &b};
    portable::run<WhereLoop<T>>(
        site, out.numel(),
        WhereLoop<T>{out.ptr<T>(), cond.ptr<bool>(), a.ptr<T>(), b.ptr<T>(), kernels::make_offset_calculator(views)});
  }
};
inline void where_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& cond, const TensorView& a,
                         const TensorView& b) {
  kernels::dispatch<WhereVisit>(a.dtype, site_of(call, call.op), out, cond, a, b);
}

template <typename T>
struct MaskedFillVisit {
  static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in, const TensorView& mask,
                  const Scalar& value) {
    const TensorView* views[3] = {&out, &in, &mask};
    const T v = kernels::convert<T>(value.to<OpMath<T>>());
    portable::run<MaskedFillLoop<T>>(
        site, out.numel(),
        MaskedFillLoop<T>{out.ptr<T>(), in.ptr<T>(), mask.ptr<bool>(), v, kernels::make_offset_calculator(views)});
  }
};
inline void masked_fill_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& in,
                               const TensorView& mask, const Scalar& value) {
  kernels::dispatch<MaskedFillVisit>(in.dtype, site_of(call, call.op), out, in, mask, value);
}

template <typename T>
struct TriangleVisit {
  static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in, int64_t diagonal,
                  bool upper) {
    const TensorView* views[2] = {&out, &in};
    const int64_t rows = out.shape[out.dim() - 2], cols = out.shape[out.dim() - 1];
    portable::run<TriangleLoop<T>>(site, out.numel(),
                                   TriangleLoop<T>{out.ptr<T>(), in.ptr<T>(), kernels::make_offset_calculator(views),
                                                   rows, cols, diagonal, upper});
  }
};
inline void triangle_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& in, int64_t diagonal,
                            bool upper) {
  kernels::dispatch<TriangleVisit>(in.dtype, site_of(call, call.op), out, in, diagonal, upper);
}

// Note [Elementwise families]
// The rows of the op table are registered by family, and each family instantiates only its own loops: nvcc compiles
// every loop for every dtype and GPU architecture, which made one translation unit for all of them the longest
// step of a CUDA build (7 minutes). The CUDA backend compiles each family in its own .cu file, so a parallel build
// runs them side by side; the CPU backend registers all of them from one file.

/// The dtypes Op<T>::kSupported admits, which are those the kernel's dispatch runs rather than rejects: the list
/// each registration below gives the op table (Note [What the op table knows about dtypes] in ops/kernel_table.h).
template <template <typename> class Op, typename... T>
constexpr ops::DTypeSet supported_dtypes_of() {
  return ops::DTypeSet::from_bits(((Op<T>::kSupported ? 1u << static_cast<int>(dtype_of<T>) : 0u) | ...));
}
template <template <typename> class Op>
constexpr ops::DTypeSet supported_dtypes() {
  return supported_dtypes_of<Op, bool, std::uint8_t, std::int32_t, std::int64_t, Half, BFloat16, float, double>();
}

/// add, mul, div, pow, maximum, minimum and relu_backward.
inline void register_arithmetic_kernels(DeviceType type) {
  using ops::register_kernel;
  register_kernel<ops::AddFn>("add", type, add_kernel, supported_dtypes<AddOp>());
  register_kernel<ops::BinaryFn>("mul", type, Binary<MulOp>::kernel, supported_dtypes<MulOp>());
  register_kernel<ops::BinaryFn>("div", type, Binary<DivOp>::kernel, supported_dtypes<DivOp>());
  register_kernel<ops::BinaryFn>("pow", type, Binary<PowOp>::kernel, supported_dtypes<PowOp>());
  register_kernel<ops::BinaryFn>("maximum", type, Binary<MaxOp>::kernel, supported_dtypes<MaxOp>());
  register_kernel<ops::BinaryFn>("relu_backward", type, Binary<ReluGradOp>::kernel, supported_dtypes<ReluGradOp>());
  register_kernel<ops::BinaryFn>("minimum", type, Binary<MinOp>::kernel, supported_dtypes<MinOp>());
}

/// Comparisons and logical ops (bool results), and the selections where, masked_fill and triu/tril ("triangle").
inline void register_comparison_kernels(DeviceType type) {
  using ops::register_kernel;
  register_kernel<ops::BinaryFn>("eq", type, Binary<EqOp>::kernel, supported_dtypes<EqOp>());
  register_kernel<ops::BinaryFn>("ne", type, Binary<NeOp>::kernel, supported_dtypes<NeOp>());
  register_kernel<ops::BinaryFn>("lt", type, Binary<LtOp>::kernel, supported_dtypes<LtOp>());
  register_kernel<ops::BinaryFn>("le", type, Binary<LeOp>::kernel, supported_dtypes<LeOp>());
  register_kernel<ops::BinaryFn>("logical_and", type, Binary<AndOp>::kernel, supported_dtypes<AndOp>());
  register_kernel<ops::BinaryFn>("logical_or", type, Binary<OrOp>::kernel, supported_dtypes<OrOp>());
  register_kernel<ops::BinaryFn>("logical_xor", type, Binary<XorOp>::kernel, supported_dtypes<XorOp>());
  register_kernel<ops::UnaryFn>("logical_not", type, Unary<NotOp>::kernel, supported_dtypes<NotOp>());
  register_kernel<ops::WhereFn>("where", type, where_kernel, ops::DTypeSet::all());
  register_kernel<ops::MaskedFillFn>("masked_fill", type, masked_fill_kernel, ops::DTypeSet::all());
  register_kernel<ops::TriangleFn>("triangle", type, triangle_kernel, ops::DTypeSet::all());
}

/// Ops of a tensor and a scalar.
inline void register_scalar_kernels(DeviceType type) {
  using ops::register_kernel;
  register_kernel<ops::ScalarFn>("add_scalar", type, WithScalar<AddOp, false>::kernel, supported_dtypes<AddOp>());
  register_kernel<ops::ScalarFn>("rsub_scalar", type, WithScalar<SubOp, true>::kernel, supported_dtypes<SubOp>());
  register_kernel<ops::ScalarFn>("mul_scalar", type, WithScalar<MulOp, false>::kernel, supported_dtypes<MulOp>());
  register_kernel<ops::ScalarFn>("div_scalar", type, WithScalar<DivOp, false>::kernel, supported_dtypes<DivOp>());
  register_kernel<ops::ScalarFn>("rdiv_scalar", type, WithScalar<DivOp, true>::kernel, supported_dtypes<DivOp>());
  register_kernel<ops::ScalarFn>("pow_scalar", type, pow_scalar_kernel, supported_dtypes<PowOp>());
}

/// neg, abs, exp, log, sqrt, rsqrt, sin, cos and erf.
inline void register_unary_math_kernels(DeviceType type) {
  using ops::register_kernel;
  register_kernel<ops::UnaryFn>("neg", type, Unary<NegOp>::kernel, supported_dtypes<NegOp>());
  register_kernel<ops::UnaryFn>("abs", type, Unary<AbsOp>::kernel, supported_dtypes<AbsOp>());
  register_kernel<ops::UnaryFn>("exp", type, Unary<ExpOp>::kernel, supported_dtypes<ExpOp>());
  register_kernel<ops::UnaryFn>("log", type, Unary<LogOp>::kernel, supported_dtypes<LogOp>());
  register_kernel<ops::UnaryFn>("sqrt", type, Unary<SqrtOp>::kernel, supported_dtypes<SqrtOp>());
  register_kernel<ops::UnaryFn>("rsqrt", type, Unary<RsqrtOp>::kernel, supported_dtypes<RsqrtOp>());
  register_kernel<ops::UnaryFn>("sin", type, Unary<SinOp>::kernel, supported_dtypes<SinOp>());
  register_kernel<ops::UnaryFn>("cos", type, Unary<CosOp>::kernel, supported_dtypes<CosOp>());
  register_kernel<ops::UnaryFn>("erf", type, Unary<ErfOp>::kernel, supported_dtypes<ErfOp>());
}

/// Activations (GELU's derivatives too) and clamp.
inline void register_activation_kernels(DeviceType type) {
  using ops::register_kernel;
  register_kernel<ops::UnaryFn>("tanh", type, Unary<TanhOp>::kernel, supported_dtypes<TanhOp>());
  register_kernel<ops::UnaryFn>("sigmoid", type, Unary<SigmoidOp>::kernel, supported_dtypes<SigmoidOp>());
  register_kernel<ops::UnaryFn>("relu", type, Unary<ReluOp>::kernel, supported_dtypes<ReluOp>());
  register_kernel<ops::UnaryFn>("gelu", type, Unary<GeluOp>::kernel, supported_dtypes<GeluOp>());
  register_kernel<ops::UnaryFn>("gelu_tanh", type, Unary<GeluTanhOp>::kernel, supported_dtypes<GeluTanhOp>());
  register_kernel<ops::BinaryFn>("gelu_backward", type, Binary<GeluGradOp>::kernel, supported_dtypes<GeluGradOp>());
  register_kernel<ops::BinaryFn>("gelu_tanh_backward", type, Binary<GeluTanhGradOp>::kernel,
                                 supported_dtypes<GeluTanhGradOp>());
  register_kernel<ops::ClampFn>("clamp", type, clamp_kernel, supported_dtypes<ClampOp>());
}

/// Every family above (Note [Elementwise families]).
inline void register_elementwise_kernels(DeviceType type) {
  register_arithmetic_kernels(type);
  register_comparison_kernels(type);
  register_scalar_kernels(type);
  register_unary_math_kernels(type);
  register_activation_kernels(type);
}

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
