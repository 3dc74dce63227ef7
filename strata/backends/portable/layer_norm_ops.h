#pragma once

// layer_norm's forward and backward kernels, written once (Note [The layer_norm kernel contract] in
// ops/layer_norm_kernels.h); instantiated by backends/cpu/layer_norm.cpp and backends/cuda/layer_norm.cu.

#include <cstdint>

#include "strata/backends/portable/reduce_ops.h"
#include "strata/ops/layer_norm_kernels.h"
#include "strata/runtime/allocator.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

// Note [How layer_norm runs]
// Forward, per row: the mean, then the sum of squared deviations around it (two passes over a row that is in cache;
// one pass of sums of x and x^2 would cancel for rows far from zero), then one pass writes y. On the CPU a row is
// one item of the pool and its sums run in eight lanes (vectorised); on the GPU a row is a block whose threads
// stride over it and merge their sums in shared memory (block_merge of reduce_ops.h).
// Backward: with xhat = (x - mean) * rstd and wg = grad_y * weight, grad_x = rstd * (wg - mean(wg) - xhat *
// mean(wg * xhat)), two sums per row. grad_weight and grad_bias sum over the rows, so the rows are cut into chunks
// (layer_norm_rows_per_chunk: a function of the shape, never of the thread count) whose partial sums go to scratch
// memory, and a last pass adds each column's partials in chunk order. On the CPU one item is a chunk: for each of
// its rows, while the row is in cache, it writes grad_x in one loop and adds the row's terms into its partial row in
// another (one loop doing both was slower: 277 against 215 us for forward and backward at [768, 128] on one core).
// On the GPU grad_x is a block per row as in the forward pass, and the partials a thread per (chunk, column), whose
// reads of a row are coalesced across the threads of a column range.

/// Rows per chunk of the backward's column sums: about 8K elements per chunk on the CPU (a few per thread at
/// nanoGPT's [768, 128]) and 32 rows on the GPU, with at most 64 or 1024 chunks.
inline int64_t layer_norm_rows_per_chunk(bool cpu, int64_t rows, int64_t n) {
  const int64_t max_chunks = cpu ? 64 : 1024;
  const int64_t wanted = cpu ? (8192 + n - 1) / n : 32;
  const int64_t needed = (rows + max_chunks - 1) / max_chunks;
  return wanted > needed ? wanted : needed;
}

namespace layer_norm_detail {

/// A sum that block_merge can merge; two of them for the backward's pair of sums.
template <typename A>
struct Sum1 {
  A a;
  STRATA_HOST_DEVICE void merge(const Sum1& o, const ops::ReduceParams&) { a += o.a; }
};
template <typename A>
struct Sum2 {
  A a, b;
  STRATA_HOST_DEVICE void merge(const Sum2& o, const ops::ReduceParams&) {
    a += o.a;
    b += o.b;
  }
};

/// The mean of a contiguous row, in eight lanes.
template <typename A, typename T>
STRATA_HOST_DEVICE A row_mean(const T* x, int64_t n) {
  return sum_in_lanes<A, false>(x, n) / static_cast<A>(n);
}

/// The sum of (x - mu)^2 over a contiguous row, in eight lanes.
template <typename A, typename T>
STRATA_HOST_DEVICE A centered_squares(const T* x, int64_t n, A mu) {
  A lane[8] = {};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int j = 0; j < 8; ++j) {
      const A d = kernels::convert<A>(x[k + j]) - mu;
      lane[j] += d * d;
    }
  }
  for (; k < n; ++k) {
    const A d = kernels::convert<A>(x[k]) - mu;
    lane[0] += d * d;
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/// sum(wg) and sum(wg * xhat) over a contiguous row, wg = g * w (w null: 1), in eight lanes each.
template <typename A, typename T>
STRATA_HOST_DEVICE Sum2<A> grad_sums(const T* g, const T* x, const T* w, int64_t n, A mu, A rs) {
  A la[8] = {}, lb[8] = {};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int j = 0; j < 8; ++j) {
      const A wg =
          w == nullptr ? kernels::convert<A>(g[k + j]) : kernels::convert<A>(g[k + j]) * kernels::convert<A>(w[k + j]);
      la[j] += wg;
      lb[j] += wg * ((kernels::convert<A>(x[k + j]) - mu) * rs);
    }
  }
  for (; k < n; ++k) {
    const A wg = w == nullptr ? kernels::convert<A>(g[k]) : kernels::convert<A>(g[k]) * kernels::convert<A>(w[k]);
    la[0] += wg;
    lb[0] += wg * ((kernels::convert<A>(x[k]) - mu) * rs);
  }
  return {((la[0] + la[1]) + (la[2] + la[3])) + ((la[4] + la[5]) + (la[6] + la[7])),
          ((lb[0] + lb[1]) + (lb[2] + lb[3])) + ((lb[4] + lb[5]) + (lb[6] + lb[7]))};
}

}  // namespace layer_norm_detail

/// The forward pass: an item per row (Note [How layer_norm runs]).
template <typename T>
struct LayerNormForward {
  using A = AccType<T>;
  T* y;
  A* mean;
  A* rstd;
  const T* x;
  const T* w;  // null: no weight
  const T* b;  // null: no bias
  int64_t n;
  A eps;

  /// Writes y[k] of one row for k = begin, begin + step, ...
  STRATA_HOST_DEVICE void write(int64_t row, A mu, A rs, int64_t begin, int64_t step) const {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    // Separate loops, so that the CPU's (step 1) vectorise without a test per element.
    if (w != nullptr && b != nullptr) {
      for (int64_t k = begin; k < n; k += step) {
        yr[k] = kernels::convert<T>((kernels::convert<A>(xr[k]) - mu) * rs * kernels::convert<A>(w[k]) +
                                    kernels::convert<A>(b[k]));
      }
    } else if (w != nullptr) {
      for (int64_t k = begin; k < n; k += step) {
        yr[k] = kernels::convert<T>((kernels::convert<A>(xr[k]) - mu) * rs * kernels::convert<A>(w[k]));
      }
    } else if (b != nullptr) {
      for (int64_t k = begin; k < n; k += step) {
        yr[k] = kernels::convert<T>((kernels::convert<A>(xr[k]) - mu) * rs + kernels::convert<A>(b[k]));
      }
    } else {
      for (int64_t k = begin; k < n; k += step) yr[k] = kernels::convert<T>((kernels::convert<A>(xr[k]) - mu) * rs);
    }
  }
  STRATA_HOST_DEVICE void operator()(int64_t row) const {
    const T* xr = x + row * n;
    const A mu = layer_norm_detail::row_mean<A>(xr, n);
    const A var = layer_norm_detail::centered_squares<A>(xr, n, mu) / static_cast<A>(n);
    const A rs = A(1) / math::sqrt(var + eps);
    mean[row] = mu;
    rstd[row] = rs;
    write(row, mu, rs, 0, 1);
  }
  STRATA_HOST_DEVICE void operator()(const kernels::ThreadIndex& idx) const {
#if defined(STRATA_DEVICE_PASS)
    const int64_t row = idx.block.x;
    const T* xr = x + row * n;
    const ops::ReduceParams none{};
    layer_norm_detail::Sum1<A> s{A(0)};
    for (int64_t k = idx.thread.x; k < n; k += idx.block_dim.x) s.a += kernels::convert<A>(xr[k]);
    s = block_merge(s, none);
    const A mu = s.a / static_cast<A>(n);
    __syncthreads();  // every thread has read the merged sum before the tree is used again
    layer_norm_detail::Sum1<A> q{A(0)};
    for (int64_t k = idx.thread.x; k < n; k += idx.block_dim.x) {
      const A d = kernels::convert<A>(xr[k]) - mu;
      q.a += d * d;
    }
    q = block_merge(q, none);
    const A rs = A(1) / math::sqrt(q.a / static_cast<A>(n) + eps);
    if (idx.thread.x == 0) {
      mean[row] = mu;
      rstd[row] = rs;
    }
    write(row, mu, rs, idx.thread.x, idx.block_dim.x);
#else
    if (idx.thread.x == 0) (*this)(static_cast<int64_t>(idx.block.x));
#endif
  }
};

/// The CPU's backward pass: an item per chunk of rows writes their grad_x and its partial column sums.
template <typename T>
struct LayerNormBackwardChunks {
  using A = AccType<T>;
  T* gx;       // null: not wanted
  A* partial;  // [chunks, 2, n]: sum of g * xhat, then of g; null when neither column sum is wanted
  const T* g;
  const T* x;
  const A* mean;
  const A* rstd;
  const T* w;
  int64_t rows, n, rows_per_chunk;

  STRATA_HOST_DEVICE void operator()(int64_t chunk) const {
    const int64_t r0 = chunk * rows_per_chunk;
    const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
    A* pw = partial == nullptr ? nullptr : partial + chunk * 2 * n;
    A* pb = pw == nullptr ? nullptr : pw + n;
    if (pw != nullptr) {
      for (int64_t k = 0; k < 2 * n; ++k) pw[k] = A(0);
    }
    for (int64_t row = r0; row < r1; ++row) {
      const T* gr = g + row * n;
      const T* xr = x + row * n;
      const A mu = mean[row], rs = rstd[row];
      if (gx != nullptr) {
        const layer_norm_detail::Sum2<A> s = layer_norm_detail::grad_sums<A>(gr, xr, w, n, mu, rs);
        const A c1 = s.a / static_cast<A>(n), c2 = s.b / static_cast<A>(n);
        T* dr = gx + row * n;
        if (w != nullptr) {
          for (int64_t k = 0; k < n; ++k) {
            const A xhat = (kernels::convert<A>(xr[k]) - mu) * rs;
            const A wg = kernels::convert<A>(gr[k]) * kernels::convert<A>(w[k]);
            dr[k] = kernels::convert<T>(rs * (wg - c1 - xhat * c2));
          }
        } else {
          for (int64_t k = 0; k < n; ++k) {
            const A xhat = (kernels::convert<A>(xr[k]) - mu) * rs;
            dr[k] = kernels::convert<T>(rs * (kernels::convert<A>(gr[k]) - c1 - xhat * c2));
          }
        }
      }
      if (pw != nullptr) {
        for (int64_t k = 0; k < n; ++k) {
          const A gk = kernels::convert<A>(gr[k]);
          pw[k] += gk * ((kernels::convert<A>(xr[k]) - mu) * rs);
          pb[k] += gk;
        }
      }
    }
  }
  STRATA_HOST_DEVICE void operator()(const kernels::ThreadIndex& idx) const {
    if (idx.thread.x == 0) (*this)(static_cast<int64_t>(idx.block.x));
  }
};

/// The GPU's grad_x: a block per row (Note [How layer_norm runs]).
template <typename T>
struct LayerNormBackwardRows {
  using A = AccType<T>;
  T* gx;
  const T* g;
  const T* x;
  const A* mean;
  const A* rstd;
  const T* w;
  int64_t n;

  STRATA_HOST_DEVICE void write(int64_t row, A c1, A c2, int64_t begin, int64_t step) const {
    const T* gr = g + row * n;
    const T* xr = x + row * n;
    T* dr = gx + row * n;
    const A mu = mean[row], rs = rstd[row];
    for (int64_t k = begin; k < n; k += step) {
      const A xhat = (kernels::convert<A>(xr[k]) - mu) * rs;
      const A wg = w == nullptr ? kernels::convert<A>(gr[k]) : kernels::convert<A>(gr[k]) * kernels::convert<A>(w[k]);
      dr[k] = kernels::convert<T>(rs * (wg - c1 - xhat * c2));
    }
  }
  STRATA_HOST_DEVICE void operator()(int64_t row) const {
    const layer_norm_detail::Sum2<A> s =
        layer_norm_detail::grad_sums<A>(g + row * n, x + row * n, w, n, mean[row], rstd[row]);
    write(row, s.a / static_cast<A>(n), s.b / static_cast<A>(n), 0, 1);
  }
  STRATA_HOST_DEVICE void operator()(const kernels::ThreadIndex& idx) const {
#if defined(STRATA_DEVICE_PASS)
    const int64_t row = idx.block.x;
    const T* gr = g + row * n;
    const T* xr = x + row * n;
    const A mu = mean[row], rs = rstd[row];
    layer_norm_detail::Sum2<A> s{A(0), A(0)};
    for (int64_t k = idx.thread.x; k < n; k += idx.block_dim.x) {
      const A wg = w == nullptr ? kernels::convert<A>(gr[k]) : kernels::convert<A>(gr[k]) * kernels::convert<A>(w[k]);
      s.a += wg;
      s.b += wg * ((kernels::convert<A>(xr[k]) - mu) * rs);
    }
    s = block_merge(s, ops::ReduceParams{});
    write(row, s.a / static_cast<A>(n), s.b / static_cast<A>(n), idx.thread.x, idx.block_dim.x);
#else
    if (idx.thread.x == 0) (*this)(static_cast<int64_t>(idx.block.x));
#endif
  }
};

/// The GPU's partial column sums: a thread per (chunk, column).
template <typename T>
struct LayerNormColumnPartials {
  using A = AccType<T>;
  A* partial;  // [chunks, 2, n]
  const T* g;
  const T* x;
  const A* mean;
  const A* rstd;
  int64_t rows, n, rows_per_chunk;

  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t chunk = i / n, j = i - chunk * n;
    const int64_t r0 = chunk * rows_per_chunk;
    const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
    A sw = 0, sb = 0;
    for (int64_t row = r0; row < r1; ++row) {
      const A gk = kernels::convert<A>(g[row * n + j]);
      sw += gk * ((kernels::convert<A>(x[row * n + j]) - mean[row]) * rstd[row]);
      sb += gk;
    }
    partial[chunk * 2 * n + j] = sw;
    partial[chunk * 2 * n + n + j] = sb;
  }
};

/// grad_weight and grad_bias: each column's partials added in chunk order.
template <typename T>
struct LayerNormColumnSums {
  using A = AccType<T>;
  T* gw;  // null: not wanted
  T* gb;
  const A* partial;
  int64_t chunks, n;

  STRATA_HOST_DEVICE void operator()(int64_t j) const {
    A sw = 0, sb = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      sw += partial[c * 2 * n + j];
      sb += partial[c * 2 * n + n + j];
    }
    if (gw != nullptr) gw[j] = kernels::convert<T>(sw);
    if (gb != nullptr) gb[j] = kernels::convert<T>(sb);
  }
};

template <typename T>
const T* optional_ptr(const TensorView& v) {
  return v.data == nullptr ? nullptr : v.ptr<T>();
}

template <typename T>
void run_layer_norm_forward(const kernels::LaunchSite& site, const TensorView& y, const TensorView& mean,
                            const TensorView& rstd, const TensorView& x, const TensorView& weight,
                            const TensorView& bias, double eps) {
  using A = AccType<T>;
  const int64_t rows = x.shape[0], n = x.shape.back();
  if (rows == 0 || n == 0) return;
  STRATA_CHECK(rows < (int64_t{1} << 31), ShapeError, "{}: too many rows ({}) for one launch", site.op, rows);
  const LayerNormForward<T> body{y.ptr<T>(), mean.ptr<A>(),           rstd.ptr<A>(),
                                 x.ptr<T>(), optional_ptr<T>(weight), optional_ptr<T>(bias),
                                 n,          static_cast<A>(eps)};
  const bool cpu = site.device.is_cpu();
  if (cpu && rows * n < kernels::kCpuGrain) {
    kernels::forall(site, rows, body);
  } else {
    kernels::launch(site, {static_cast<std::uint32_t>(rows)}, {cpu ? 1u : block_size_for(n)}, body);
  }
}

/// `gpu_plan`: the GPU's passes and chunks, which tests run on the CPU too (the blocks' threads then one after
/// another, the rows' sums serial), to check the GPU's indexing where no GPU is.
template <typename T>
void run_layer_norm_backward(const kernels::LaunchSite& site, const TensorView& grad_x, const TensorView& grad_w,
                             const TensorView& grad_b, const TensorView& grad_y, const TensorView& x,
                             const TensorView& mean, const TensorView& rstd, const TensorView& weight, bool gpu_plan) {
  using A = AccType<T>;
  const int64_t rows = x.shape[0], n = x.shape.back();
  if (rows == 0 || n == 0) return;
  STRATA_CHECK(rows < (int64_t{1} << 31), ShapeError, "{}: too many rows ({}) for one launch", site.op, rows);
  const bool cpu = !gpu_plan;
  const bool columns = grad_w.data != nullptr || grad_b.data != nullptr;
  const int64_t per_chunk = layer_norm_rows_per_chunk(cpu, rows, n);
  const int64_t chunks = (rows + per_chunk - 1) / per_chunk;
  DataPtr scratch;
  A* partial = nullptr;
  if (columns) {
    scratch =
        allocator(site.device).allocate(static_cast<std::size_t>(chunks * 2 * n) * sizeof(A), site.stream, site.op);
    partial = static_cast<A*>(scratch.get());
  }
  T* gx = grad_x.data == nullptr ? nullptr : grad_x.ptr<T>();
  if (cpu) {
    const LayerNormBackwardChunks<T> body{
        gx,   partial, grad_y.ptr<T>(), x.ptr<T>(), mean.ptr<A>(), rstd.ptr<A>(), optional_ptr<T>(weight),
        rows, n,       per_chunk};
    if (rows * n < kernels::kCpuGrain) {
      kernels::forall(site, chunks, body);
    } else {
      kernels::launch(site, {static_cast<std::uint32_t>(chunks)}, {1u}, body);
    }
  } else {
    if (gx != nullptr) {
      const LayerNormBackwardRows<T> body{
          gx, grad_y.ptr<T>(), x.ptr<T>(), mean.ptr<A>(), rstd.ptr<A>(), optional_ptr<T>(weight), n};
      kernels::launch(site, {static_cast<std::uint32_t>(rows)}, {block_size_for(n)}, body);
    }
    if (columns) {
      kernels::forall(site, chunks * n,
                      LayerNormColumnPartials<T>{partial, grad_y.ptr<T>(), x.ptr<T>(), mean.ptr<A>(), rstd.ptr<A>(),
                                                 rows, n, per_chunk});
    }
  }
  if (columns) {
    T* gw = grad_w.data == nullptr ? nullptr : grad_w.ptr<T>();
    T* gb = grad_b.data == nullptr ? nullptr : grad_b.ptr<T>();
    kernels::forall(site, n, LayerNormColumnSums<T>{gw, gb, partial, chunks, n});
  }
}

template <typename T>
struct LayerNormDispatch {
  static void forward(const kernels::LaunchSite& site, const TensorView& y, const TensorView& mean,
                      const TensorView& rstd, const TensorView& x, const TensorView& weight, const TensorView& bias,
                      double eps) {
    if constexpr (kIsFloating<T>) {
      run_layer_norm_forward<T>(site, y, mean, rstd, x, weight, bias, eps);
    } else {
      STRATA_THROW(DTypeError, "{}: not supported for dtype {}", site.op, dtype_of<T>);
    }
  }
  static void backward(const kernels::LaunchSite& site, const TensorView& grad_x, const TensorView& grad_w,
                       const TensorView& grad_b, const TensorView& grad_y, const TensorView& x, const TensorView& mean,
                       const TensorView& rstd, const TensorView& weight) {
    if constexpr (kIsFloating<T>) {
      run_layer_norm_backward<T>(site, grad_x, grad_w, grad_b, grad_y, x, mean, rstd, weight, !site.device.is_cpu());
    } else {
      STRATA_THROW(DTypeError, "{}: not supported for dtype {}", site.op, dtype_of<T>);
    }
  }
};

template <typename T>
struct LayerNormForwardVisit {
  template <typename... Args>
  static void run(Args&&... args) {
    LayerNormDispatch<T>::forward(args...);
  }
};
template <typename T>
struct LayerNormBackwardVisit {
  template <typename... Args>
  static void run(Args&&... args) {
    LayerNormDispatch<T>::backward(args...);
  }
};

inline void layer_norm_forward_kernel(const ops::OpCall& call, const TensorView& y, const TensorView& mean,
                                      const TensorView& rstd, const TensorView& x, const TensorView& weight,
                                      const TensorView& bias, double eps) {
  kernels::dispatch<LayerNormForwardVisit>(x.dtype, site_of(call, "layer_norm_forward"), y, mean, rstd, x, weight, bias,
                                           eps);
}

inline void layer_norm_backward_kernel(const ops::OpCall& call, const TensorView& grad_x, const TensorView& grad_w,
                                       const TensorView& grad_b, const TensorView& grad_y, const TensorView& x,
                                       const TensorView& mean, const TensorView& rstd, const TensorView& weight) {
  kernels::dispatch<LayerNormBackwardVisit>(x.dtype, site_of(call, "layer_norm_backward"), grad_x, grad_w, grad_b,
                                            grad_y, x, mean, rstd, weight);
}

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
