#pragma once

// 2-D pooling written once (Note [The DNN kernel contract] in ops/dnn_kernels.h); instantiated by
// backends/cpu/pool.cpp and backends/cuda/pool.cu. One thread per output element forward. Backward passes gather
// instead of scatter: one thread per input element sums the outputs whose windows hold it, so there are no atomics
// and the result does not depend on thread order.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "strata/backends/portable/launch_site.h"
#include "strata/backends/portable/reduce_accumulators.h"
#include "strata/kernels/elementwise.h"
#include "strata/ops/dnn_kernels.h"
#include "strata/runtime/parallel.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

/// Plane geometry of a pooling: input H x W, output OH x OW.
struct PoolPlanes {
  int64_t h, w, oh, ow;
  static PoolPlanes of(const TensorView& in, const TensorView& out) {
    return {in.shape[2], in.shape[3], out.shape[2], out.shape[3]};
  }
};

STRATA_HOST_DEVICE inline int64_t min_of(int64_t a, int64_t b) { return a < b ? a : b; }
STRATA_HOST_DEVICE inline int64_t max_of(int64_t a, int64_t b) { return a < b ? b : a; }

// The outputs along one axis whose windows (stride s, size k, padding p) contain input position i: [begin, end).
STRATA_HOST_DEVICE inline int64_t first_window(int64_t i, int64_t k, int64_t s, int64_t p) {
  return i + p < k ? 0 : (i + p - k) / s + 1;
}
STRATA_HOST_DEVICE inline int64_t last_window_end(int64_t i, int64_t s, int64_t p, int64_t out) {
  return min_of((i + p) / s + 1, out);
}

// PyTorch's adaptive windows: output o of `out` covers input [floor(o * in / out), ceil((o + 1) * in / out)).
STRATA_HOST_DEVICE inline int64_t adaptive_begin(int64_t o, int64_t in, int64_t out) { return o * in / out; }
STRATA_HOST_DEVICE inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

template <typename T>
struct MaxPoolForward {
  T* out;
  int64_t* indices;
  const T* in;
  PoolPlanes g;
  ops::Pool2dParams p;
  // Output (oh, ow) of one plane: its maximum, and where in the plane it is.
  STRATA_HOST_DEVICE void window(const T* x, int64_t oh, int64_t ow, T& result, int64_t& where) const {
    using C = CompareType<T>;
    const int64_t h0 = max_of(oh * p.stride_h - p.pad_h, 0), w0 = max_of(ow * p.stride_w - p.pad_w, 0);
    const int64_t h1 = min_of(oh * p.stride_h - p.pad_h + p.kernel_h, g.h);
    const int64_t w1 = min_of(ow * p.stride_w - p.pad_w + p.kernel_w, g.w);
    // The first NaN wins, as in PyTorch. Branch-free: on real data each comparison is a coin toss, and
    // mispredicted branches cost more than the loads. `at` moves by a mask; `best` is a plain max.
    C best = -math::inf<C>();
    int64_t at = h0 * g.w + w0;
    bool nan = false;
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t w = w0; w < w1; ++w) {
        const C v = kernels::convert<C>(x[h * g.w + w]);
        const bool first_nan = math::is_nan(v) & !nan;
        const bool take = ((v > best) & !nan) | first_nan;
        at ^= (at ^ (h * g.w + w)) & -static_cast<int64_t>(take);
        best = v > best ? v : best;
        nan |= first_nan;
      }
    }
    result = nan ? x[at] : kernels::convert<T>(best);
    where = at;
  }
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t ow = i % g.ow, oh = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
    window(in + plane * g.h * g.w, oh, ow, out[i], indices[i]);
  }
  /// The CPU schedule: whole planes, without the per-element index arithmetic.
  void plane(int64_t k) const {
    const T* x = in + k * g.h * g.w;
    const int64_t base = k * g.oh * g.ow;
#if !defined(STRATA_GPU_COMPILER)
    if constexpr (std::is_same_v<T, float>) {
      if (p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 && p.pad_w == 0 &&
          g.ow >= 4 && g.w < std::numeric_limits<int32_t>::max()) {
        return plane_2x2(x, base);
      }
    }
#endif
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        window(x, oh, ow, out[base + oh * g.ow + ow], indices[base + oh * g.ow + ow]);
      }
    }
  }
#if !defined(STRATA_GPU_COMPILER)
  // The networks' usual 2x2/2 pooling of floats, four outputs at a time in GCC's generic vectors (SSE2 on x86-64):
  // two input rows at a time, maxima and where each lies in its window from lane-wise comparisons (all-ones
  // masks, hence the minus signs), the indices widened to int64 in the register. A row's last four outputs
  // overlap the previous four rather than leaving a scalar tail: the rows are short (7 and 14 in the reference
  // network). Written as scalar code, the loop stayed scalar, comparisons feeding 64-bit selects, at about half this
  // loop's speed. NaN is checked once per row; a row holding one is redone through window(), which knows the NaN
  // rule.
  using Floats = float __attribute__((vector_size(16)));
  using Ints = int32_t __attribute__((vector_size(16)));
  using Longs = int64_t __attribute__((vector_size(32)));
  static Floats load(const float* p) {
    Floats v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  void plane_2x2(const float* x, int64_t base) const {
    const int64_t w = g.w, n = g.ow;  // locals: the stores below may alias the struct, as far as the compiler knows
    const auto w32 = static_cast<int32_t>(w);  // plane() checks it fits
    const Ints width{w32, w32, w32, w32}, step{0, 2, 4, 6};
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      const int64_t row = 2 * oh * w;
      const float* r0 = x + row;
      const float* r1 = r0 + w;
      float* o = out + base + oh * n;
      int64_t* at = indices + base + oh * n;
      Ints nan{};
      for (int64_t j0 = 0; j0 < n; j0 += 4) {
        const int64_t j = j0 + 4 <= n ? j0 : n - 4;
        const Floats top0 = load(r0 + 2 * j), top1 = load(r0 + 2 * j + 4);
        const Floats bottom0 = load(r1 + 2 * j), bottom1 = load(r1 + 2 * j + 4);
        const Floats a = __builtin_shufflevector(top0, top1, 0, 2, 4, 6);
        const Floats b = __builtin_shufflevector(top0, top1, 1, 3, 5, 7);
        const Floats c = __builtin_shufflevector(bottom0, bottom1, 0, 2, 4, 6);
        const Floats d = __builtin_shufflevector(bottom0, bottom1, 1, 3, 5, 7);
        const Ints right_top = b > a, right_bottom = d > c;
        const Floats top = right_top ? b : a, bottom = right_bottom ? d : c;
        const Ints down = bottom > top;
        const Floats best = down ? bottom : top;
        std::memcpy(o + j, &best, sizeof best);
        const Ints offset = (down ? width - right_bottom : -right_top) + step;
        const Longs where = __builtin_convertvector(offset, Longs) + (row + 2 * j);
        std::memcpy(at + j, &where, sizeof where);
        const Floats sum = (a + b) + (c + d);
        nan |= sum != sum;
      }
      if ((nan[0] | nan[1] | nan[2] | nan[3]) != 0) {
        for (int64_t ow = 0; ow < n; ++ow) window(x, oh, ow, o[ow], at[ow]);
      }
    }
  }
#endif
};

template <typename T>
struct MaxPoolBackward {
  T* grad_in;
  const T* grad_out;
  const int64_t* indices;
  PoolPlanes g;
  ops::Pool2dParams p;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    using A = AccType<T>;
    const int64_t iw = i % g.w, ih = (i / g.w) % g.h, plane = i / (g.w * g.h);
    const int64_t here = ih * g.w + iw, base = plane * g.oh * g.ow;
    const int64_t oh1 = last_window_end(ih, p.stride_h, p.pad_h, g.oh);
    const int64_t ow1 = last_window_end(iw, p.stride_w, p.pad_w, g.ow);
    A sum = 0;
    for (int64_t oh = first_window(ih, p.kernel_h, p.stride_h, p.pad_h); oh < oh1; ++oh) {
      for (int64_t ow = first_window(iw, p.kernel_w, p.stride_w, p.pad_w); ow < ow1; ++ow) {
        const int64_t o = base + oh * g.ow + ow;
        if (indices[o] == here) sum += kernels::convert<A>(grad_out[o]);
      }
    }
    grad_in[i] = kernels::convert<T>(sum);
  }
  /// The CPU schedule: one thread owns a whole plane, so it may scatter each output's gradient to its argmax
  /// (O(outputs), no search); same sums as the gather above.
  void plane(int64_t k) const {
    using A = AccType<T>;
    T* gi = grad_in + k * g.h * g.w;
    const T* go = grad_out + k * g.oh * g.ow;
    const int64_t* at = indices + k * g.oh * g.ow;
    for (int64_t j = 0; j < g.h * g.w; ++j) gi[j] = kernels::convert<T>(A(0));
    for (int64_t o = 0; o < g.oh * g.ow; ++o) {
      gi[at[o]] = kernels::convert<T>(kernels::convert<A>(gi[at[o]]) + kernels::convert<A>(go[o]));
    }
  }
};

template <typename T>
struct AvgPoolForward {
  T* out;
  const T* in;
  PoolPlanes g;
  ops::Pool2dParams p;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    using A = AccType<T>;
    const int64_t ow = i % g.ow, oh = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
    const T* x = in + plane * g.h * g.w;
    const int64_t h0 = max_of(oh * p.stride_h - p.pad_h, 0), w0 = max_of(ow * p.stride_w - p.pad_w, 0);
    const int64_t h1 = min_of(oh * p.stride_h - p.pad_h + p.kernel_h, g.h);
    const int64_t w1 = min_of(ow * p.stride_w - p.pad_w + p.kernel_w, g.w);
    A sum = 0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) sum += kernels::convert<A>(x[h * g.w + w]);
    out[i] = kernels::convert<T>(sum / static_cast<A>(p.kernel_h * p.kernel_w));
  }
};

template <typename T>
struct AvgPoolBackward {
  T* grad_in;
  const T* grad_out;
  PoolPlanes g;
  ops::Pool2dParams p;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    using A = AccType<T>;
    const int64_t iw = i % g.w, ih = (i / g.w) % g.h, plane = i / (g.w * g.h);
    const T* go = grad_out + plane * g.oh * g.ow;
    const int64_t oh1 = last_window_end(ih, p.stride_h, p.pad_h, g.oh);
    const int64_t ow1 = last_window_end(iw, p.stride_w, p.pad_w, g.ow);
    A sum = 0;
    for (int64_t oh = first_window(ih, p.kernel_h, p.stride_h, p.pad_h); oh < oh1; ++oh)
      for (int64_t ow = first_window(iw, p.kernel_w, p.stride_w, p.pad_w); ow < ow1; ++ow)
        sum += kernels::convert<A>(go[oh * g.ow + ow]);
    grad_in[i] = kernels::convert<T>(sum / static_cast<A>(p.kernel_h * p.kernel_w));
  }
};

template <typename T>
struct AdaptiveAvgPoolForward {
  T* out;
  const T* in;
  PoolPlanes g;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    using A = AccType<T>;
    const int64_t ow = i % g.ow, oh = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
    const T* x = in + plane * g.h * g.w;
    const int64_t h0 = adaptive_begin(oh, g.h, g.oh), h1 = adaptive_end(oh, g.h, g.oh);
    const int64_t w0 = adaptive_begin(ow, g.w, g.ow), w1 = adaptive_end(ow, g.w, g.ow);
    A sum = 0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) sum += kernels::convert<A>(x[h * g.w + w]);
    out[i] = kernels::convert<T>(sum / static_cast<A>((h1 - h0) * (w1 - w0)));
  }
};

template <typename T>
struct AdaptiveAvgPoolBackward {
  T* grad_in;
  const T* grad_out;
  PoolPlanes g;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    using A = AccType<T>;
    const int64_t iw = i % g.w, ih = (i / g.w) % g.h, plane = i / (g.w * g.h);
    const T* go = grad_out + plane * g.oh * g.ow;
    // Output o's window holds i exactly when floor(i * out / in) <= o < ceil((i + 1) * out / in).
    const int64_t oh0 = ih * g.oh / g.h, oh1 = ((ih + 1) * g.oh + g.h - 1) / g.h;
    const int64_t ow0 = iw * g.ow / g.w, ow1 = ((iw + 1) * g.ow + g.w - 1) / g.w;
    A sum = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t rows = adaptive_end(oh, g.h, g.oh) - adaptive_begin(oh, g.h, g.oh);
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t cols = adaptive_end(ow, g.w, g.ow) - adaptive_begin(ow, g.w, g.ow);
        sum += kernels::convert<A>(go[oh * g.ow + ow]) / static_cast<A>(rows * cols);
      }
    }
    grad_in[i] = kernels::convert<T>(sum);
  }
};

/// Runs `f` over `n` elements: on a GPU one thread per element (operator()), on the CPU whole planes
/// (F::plane) on the thread pool.
template <typename F>
void for_planes(const kernels::LaunchSite& site, int64_t n, int64_t planes, const F& f) {
#if defined(STRATA_GPU_COMPILER)
  (void)planes;
  kernels::forall(site, n, f);
#else
  if (!site.device.is_cpu()) kernels::detail::throw_host_only(site);
  if (n == 0) return;
  const int64_t grain = std::max<int64_t>(1, kernels::kCpuGrain / std::max<int64_t>(1, n / planes));
  parallel_for(planes, grain, [&f](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) f.plane(k);
  });
#endif
}

/// The dtypes dispatch_floating handles, which the pooling registrations give the op table.
inline constexpr ops::DTypeSet kPoolDTypes = ops::DTypeSet::floating();

/// Calls Visitor<T>::run(args...) for the floating dtypes pooling supports (kPoolDTypes).
template <template <typename> class Visitor, typename... Args>
void dispatch_floating(const ops::OpCall& call, DType dtype, Args&&... args) {
  switch (dtype) {
    case DType::F16: return Visitor<Half>::run(call, args...);
    case DType::BF16: return Visitor<BFloat16>::run(call, args...);
    case DType::F32: return Visitor<float>::run(call, args...);
    case DType::F64: return Visitor<double>::run(call, args...);
    default: STRATA_THROW(DTypeError, "{}: {} tensors are not supported (use a floating dtype)", call.op, dtype);
  }
}

template <typename T>
struct MaxPool {
  static void run(const ops::OpCall& call, const TensorView& out, const TensorView& indices, const TensorView& in,
                  const ops::Pool2dParams& p) {
    for_planes(site_of(call, "max_pool2d"), out.numel(), out.shape[0] * out.shape[1],
               MaxPoolForward<T>{out.ptr<T>(), indices.ptr<int64_t>(), in.ptr<T>(), PoolPlanes::of(in, out), p});
  }
};
template <typename T>
struct MaxPoolGrad {
  static void run(const ops::OpCall& call, const TensorView& grad_in, const TensorView& grad_out,
                  const TensorView& indices, const ops::Pool2dParams& p) {
    for_planes(site_of(call, "max_pool2d_backward"), grad_in.numel(), grad_in.shape[0] * grad_in.shape[1],
               MaxPoolBackward<T>{grad_in.ptr<T>(), grad_out.ptr<T>(), indices.ptr<int64_t>(),
                                  PoolPlanes::of(grad_in, grad_out), p});
  }
};
template <typename T>
struct AvgPool {
  static void run(const ops::OpCall& call, const TensorView& out, const TensorView& in, const ops::Pool2dParams& p) {
    kernels::forall(site_of(call, "avg_pool2d"), out.numel(),
                    AvgPoolForward<T>{out.ptr<T>(), in.ptr<T>(), PoolPlanes::of(in, out), p});
  }
};
template <typename T>
struct AvgPoolGrad {
  static void run(const ops::OpCall& call, const TensorView& grad_in, const TensorView& grad_out,
                  const ops::Pool2dParams& p) {
    kernels::forall(site_of(call, "avg_pool2d_backward"), grad_in.numel(),
                    AvgPoolBackward<T>{grad_in.ptr<T>(), grad_out.ptr<T>(), PoolPlanes::of(grad_in, grad_out), p});
  }
};
template <typename T>
struct AdaptiveAvgPool {
  static void run(const ops::OpCall& call, const TensorView& out, const TensorView& in) {
    kernels::forall(site_of(call, "adaptive_avg_pool2d"), out.numel(),
                    AdaptiveAvgPoolForward<T>{out.ptr<T>(), in.ptr<T>(), PoolPlanes::of(in, out)});
  }
};
template <typename T>
struct AdaptiveAvgPoolGrad {
  static void run(const ops::OpCall& call, const TensorView& grad_in, const TensorView& grad_out) {
    kernels::forall(site_of(call, "adaptive_avg_pool2d_backward"), grad_in.numel(),
                    AdaptiveAvgPoolBackward<T>{grad_in.ptr<T>(), grad_out.ptr<T>(), PoolPlanes::of(grad_in, grad_out)});
  }
};

inline void max_pool2d_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& indices,
                              const TensorView& in, const ops::Pool2dParams& p) {
  dispatch_floating<MaxPool>(call, in.dtype, out, indices, in, p);
}
inline void max_pool2d_backward_kernel(const ops::OpCall& call, const TensorView& grad_in, const TensorView& grad_out,
                                       const TensorView& indices, const ops::Pool2dParams& p) {
  dispatch_floating<MaxPoolGrad>(call, grad_in.dtype, grad_in, grad_out, indices, p);
}
inline void avg_pool2d_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& in,
                              const ops::Pool2dParams& p) {
  dispatch_floating<AvgPool>(call, in.dtype, out, in, p);
}
inline void avg_pool2d_backward_kernel(const ops::OpCall& call, const TensorView& grad_in, const TensorView& grad_out,
                                       const ops::Pool2dParams& p) {
  dispatch_floating<AvgPoolGrad>(call, grad_in.dtype, grad_in, grad_out, p);
}
inline void adaptive_avg_pool2d_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& in) {
  dispatch_floating<AdaptiveAvgPool>(call, in.dtype, out, in);
}
inline void adaptive_avg_pool2d_backward_kernel(const ops::OpCall& call, const TensorView& grad_in,
                                                const TensorView& grad_out) {
  dispatch_floating<AdaptiveAvgPoolGrad>(call, grad_in.dtype, grad_in, grad_out);
}

/// Fills the pooling rows of the op table for one device type (called once by each backend).
inline void register_pool_kernels(DeviceType type) {
  using ops::register_kernel;
  register_kernel<ops::MaxPool2dFn>("max_pool2d", type, max_pool2d_kernel, kPoolDTypes);
  register_kernel<ops::MaxPool2dBackwardFn>("max_pool2d_backward", type, max_pool2d_backward_kernel, kPoolDTypes);
  register_kernel<ops::AvgPool2dFn>("avg_pool2d", type, avg_pool2d_kernel, kPoolDTypes);
  register_kernel<ops::AvgPool2dBackwardFn>("avg_pool2d_backward", type, avg_pool2d_backward_kernel, kPoolDTypes);
  register_kernel<ops::AdaptiveAvgPool2dFn>("adaptive_avg_pool2d", type, adaptive_avg_pool2d_kernel, kPoolDTypes);
  register_kernel<ops::AdaptiveAvgPool2dBackwardFn>("adaptive_avg_pool2d_backward", type,
                                                    adaptive_avg_pool2d_backward_kernel, kPoolDTypes);
}

}  // inline namespace STRATA_KERNEL_NS
}  // namespace strata::portable
