#pragma once

// Softmax and log-softmax over the last dim, written once; instantiated by backends/cpu/reduce_ops.cpp and
// backends/cuda/reduce_ops.cu. A row's maximum and sum of exp(x - max) come first (serially on the CPU, as an
// online log-sum-exp merged in a block on the GPU), then one pass writes the result.

#include "strata/backends/portable/reduce_ops.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

template <typename T>
struct SoftmaxRows {
  using A = AccType<T>;
  T* out;
  const T* in;
  kernels::OffsetCalculator<2> rows;  // out, in
  int64_t n, out_stride, in_stride;
  bool log;

  // A row with a NaN, or whose maximum is infinite, gives NaN everywhere (as exp(inf - inf) does in PyTorch).
  STRATA_HOST_DEVICE void write(T* y, const T* x, int64_t begin, int64_t step, A max, A sum) const {
    if (log) {
      const A log_sum = math::log(sum);  // (x - max) - log_sum keeps the digits that max + log_sum would round off
      for (int64_t k = begin; k < n; k += step) {
        y[k * out_stride] = kernels::convert<T>((kernels::convert<A>(x[k * in_stride]) - max) - log_sum);
      }
    } else {
      const A scale = A(1) / sum;
      for (int64_t k = begin; k < n; k += step) {
        y[k * out_stride] = kernels::convert<T>(math::exp(kernels::convert<A>(x[k * in_stride]) - max) * scale);
      }
    }
  }
  STRATA_HOST_DEVICE void operator()(int64_t row) const {
    int64_t o[2];
    rows.offsets(row, o);
    const T* x = in + o[1];
    A max = -math::inf<A>();
    for (int64_t k = 0; k < n; ++k) {
      const A v = kernels::convert<A>(x[k * in_stride]);
      max = max < v ? v : max;
    }
    A sum = 0;
    if constexpr (std::is_same_v<T, A>) {
      if (!log) {  // one exp per element: the output holds exp(x - max) until it is scaled
        T* y = out + o[0];
        for (int64_t k = 0; k < n; ++k) {
          const A e = math::exp(x[k * in_stride] - max);
          y[k * out_stride] = e;
          sum += e;
        }
        const A scale = A(1) / sum;
        for (int64_t k = 0; k < n; ++k) y[k * out_stride] *= scale;
        return;
      }
    }
    for (int64_t k = 0; k < n; ++k) sum += math::exp(kernels::convert<A>(x[k * in_stride]) - max);
    write(out + o[0], x, 0, 1, max, sum);
  }
  STRATA_HOST_DEVICE void operator()(const kernels::ThreadIndex& idx) const {
#if defined(STRATA_DEVICE_PASS)
    int64_t o[2];
    rows.offsets(idx.block.x, o);
    const T* x = in + o[1];
    const ops::ReduceParams none{};
    LogSumExpAcc<T> acc = LogSumExpAcc<T>::identity(none);
    for (int64_t k = idx.thread.x; k < n; k += idx.block_dim.x) acc.add(x[k * in_stride], k, none);
    acc = block_merge(acc, none);
    const A sum = math::is_nan(acc.max) || acc.max == math::inf<A>() || acc.max == -math::inf<A>() ? A(NAN) : acc.sum;
    write(out + o[0], x, idx.thread.x, idx.block_dim.x, acc.max, sum);
#else
    if (idx.thread.x == 0) (*this)(idx.block.x);
#endif
  }
};

template <typename T>
void run_softmax(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in, bool log) {
  const int64_t n = in.shape.back();
  const int64_t rows = n == 0 ? 0 : in.numel() / n;
  if (rows == 0) return;
  TensorView in_rows = in, out_rows = out;
  in_rows.shape.pop_back();
  in_rows.strides.pop_back();
  out_rows.shape = in_rows.shape;
  out_rows.strides.pop_back();
  const TensorView* views[2] = {&out_rows, &in_rows};
  const SoftmaxRows<T> body{out.ptr<T>(), in.ptr<T>(), kernels::make_offset_calculator(views), n,
                            out.strides.back(), in.strides.back(), log};
  STRATA_CHECK(rows < (int64_t{1} << 31), ShapeError, "{}: too many rows ({}) for one launch", site.op, rows);
  const bool cpu = site.device.is_cpu();
  if ((cpu && rows * n < kernels::kCpuGrain) || (!cpu && (n <= 32 || (in.strides.back() != 1 && rows >= 4096)))) {
    kernels::forall(site, rows, body);
  } else {
    kernels::launch(site, {static_cast<std::uint32_t>(rows)}, {cpu ? 1u : block_size_for(n)}, body);
  }
}

template <typename T>
struct SoftmaxDispatch {
  static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in, bool log) {
    if constexpr (kIsFloating<T>) {
      run_softmax<T>(site, out, in, log);
    } else {
      STRATA_THROW(DTypeError, "{}: not supported for dtype {}", site.op, dtype_of<T>);
    }
  }
};

inline void softmax_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& in, bool log) {
  kernels::dispatch<SoftmaxDispatch>(in.dtype, site_of(call, "softmax"), out, in, log);
}

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
