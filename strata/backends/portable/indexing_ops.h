#pragma once

// Indexing with data, written once; instantiated by backends/cpu/indexing_ops.cpp and backends/cuda/indexing_ops.cu.
// Operands are contiguous (see ops/indexing_kernels.h); out-of-range indices are device-side asserts.

#include <algorithm>
#include <type_traits>

#include "strata/backends/portable/launch_site.h"
#include "strata/kernels/elementwise.h"
#include "strata/ops/indexing_kernels.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

/// Row-major shape of up to kMaxDims dims, device-copyable.
struct SmallShape {
  int ndim = 0;
  int64_t size[kernels::kMaxDims] = {};
  int64_t stride[kernels::kMaxDims] = {};

  static SmallShape of(const TensorView& v) {
    STRATA_CHECK(v.dim() <= kernels::kMaxDims, ShapeError, "indexing supports at most {} dimensions, got {}",
                 kernels::kMaxDims, v.shape);
    SmallShape s;
    s.ndim = static_cast<int>(v.dim());
    const Strides strides = contiguous_strides(v.shape);
    for (int d = 0; d < s.ndim; ++d) {
      s.size[d] = v.shape[d];
      s.stride[d] = strides[d];
    }
    return s;
  }
};

inline int64_t prod(const Shape& shape, int64_t begin, int64_t end) {
  int64_t n = 1;
  for (int64_t d = begin; d < end; ++d) n *= shape[d];
  return n;
}

template <typename T>
struct IndexSelectBody {
  T* out;
  const T* in;
  const int64_t* index;
  int64_t count, size, inner;
  KernelAssertContext check;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t k = i % inner;
    const int64_t j = (i / inner) % count;
    const int64_t o = i / (inner * count);
    const int64_t at = index[j];
    STRATA_KERNEL_ASSERT(check, at >= 0 && at < size, j, at, size);
    if (at >= 0 && at < size) out[i] = in[(o * size + at) * inner + k];
  }
  /// Elements [begin, end) a row of `inner` at a time, one index lookup each (kernels::forall on the CPU).
  void cpu_range(int64_t begin, int64_t end) const {
    while (begin < end) {
      const int64_t k = begin % inner;
      const int64_t row = begin / inner;
      const int64_t j = row % count;
      const int64_t at = index[j];
      const int64_t n = std::min(end - begin, inner - k);
      STRATA_KERNEL_ASSERT(check, at >= 0 && at < size, j, at, size);
      if (at >= 0 && at < size) {
        const T* src = in + ((row / count) * size + at) * inner + k;
        T* dst = out + begin;
        for (int64_t e = 0; e < n; ++e) dst[e] = src[e];
      }
      begin += n;
    }
  }
};

template <typename T>
struct IndexSelect {
  static void run(const ops::OpCall& call, const TensorView& out, const TensorView& in, const TensorView& index,
                  int64_t dim) {
    const kernels::LaunchSite site = site_of(call, "index_select");
    const int64_t size = in.shape[dim];
    const int64_t inner = prod(in.shape, dim + 1, in.dim());
    kernels::forall(site, out.numel(),
                    IndexSelectBody<T>{out.ptr<T>(), in.ptr<T>(), index.ptr<int64_t>(), index.numel(), size, inner,
                                       site.asserts("index out of range for the selected dimension")});
  }
};

inline void index_select_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& in,
                                const TensorView& index, int64_t dim) {
  kernels::dispatch<IndexSelect>(in.dtype, call, out, in, index, dim);
}

// Offset in `target` of the element at `i` of `index_shape`, with coordinate `dim` replaced by `at`.
STRATA_HOST_DEVICE inline int64_t redirected_offset(int64_t i, const SmallShape& index_shape, const SmallShape& target,
                                                    int64_t dim, int64_t at) {
  int64_t offset = 0;
  for (int d = index_shape.ndim - 1; d >= 0; --d) {
    const int64_t coord = i % index_shape.size[d];
    i /= index_shape.size[d];
    offset += (d == dim ? at : coord) * target.stride[d];
  }
  return offset;
}

template <typename T>
struct GatherBody {
  T* out;
  const T* in;
  const int64_t* index;
  SmallShape index_shape, in_shape;
  int64_t dim;
  KernelAssertContext check;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t at = index[i];
    const int64_t size = in_shape.size[dim];
    STRATA_KERNEL_ASSERT(check, at >= 0 && at < size, i, at, size);
    if (at >= 0 && at < size) out[i] = in[redirected_offset(i, index_shape, in_shape, dim, at)];
  }
};

template <typename T>
struct Gather {
  static void run(const ops::OpCall& call, const TensorView& out, const TensorView& in, const TensorView& index,
                  int64_t dim) {
    const kernels::LaunchSite site = site_of(call, "gather");
    kernels::forall(
        site, out.numel(),
        GatherBody<T>{out.ptr<T>(), in.ptr<T>(), index.ptr<int64_t>(), SmallShape::of(index), SmallShape::of(in), dim,
                      site.asserts("index out of range for the gathered dimension")});
  }
};

inline void gather_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& in, const TensorView& index,
                          int64_t dim) {
  kernels::dispatch<Gather>(in.dtype, call, out, in, index, dim);
}

template <typename T>
struct ScatterAddBody {
  T* out;
  const int64_t* index;
  const T* src;
  SmallShape index_shape, out_shape, src_shape;
  int64_t dim;
  KernelAssertContext check;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t at = index[i];
    const int64_t size = out_shape.size[dim];
    STRATA_KERNEL_ASSERT(check, at >= 0 && at < size, i, at, size);
    if (at < 0 || at >= size) return;
    int64_t rest = i, src_offset = 0;
    for (int d = index_shape.ndim - 1; d >= 0; --d) {
      src_offset += (rest % index_shape.size[d]) * src_shape.stride[d];
      rest /= index_shape.size[d];
    }
    kernels::atomic_add(out + redirected_offset(i, index_shape, out_shape, dim, at), src[src_offset]);
  }
  /// On the CPU (Note [Scatter-add adds in one order]): the lines along `dim` whose other coordinates are `o` over
  /// the dims before `dim` and k0 <= k < k1 over those after it, each walked from the first index to the last.
  void cpu_lines(int64_t o, int64_t k0, int64_t k1) const {
    const int nd = index_shape.ndim;
    const int64_t len = index_shape.size[dim];
    const int64_t size = out_shape.size[dim];
    int64_t inner = 1;
    for (int d = static_cast<int>(dim) + 1; d < nd; ++d) inner *= index_shape.size[d];
    int64_t src_o = 0, out_o = 0;
    for (int64_t d = dim - 1, rest = o; d >= 0; --d) {
      const int64_t coord = rest % index_shape.size[d];
      rest /= index_shape.size[d];
      src_o += coord * src_shape.stride[d];
      out_o += coord * out_shape.stride[d];
    }
    // Along the last dimension (when it is not `dim`) the offsets step by its strides; the rest of k's coordinates
    // are worked out once per row of it.
    const bool dim_is_last = dim == nd - 1;
    const int64_t width = dim_is_last ? 1 : index_shape.size[nd - 1];
    const int64_t src_step = dim_is_last ? 0 : src_shape.stride[nd - 1];
    const int64_t out_step = dim_is_last ? 0 : out_shape.stride[nd - 1];
    for (int64_t j = 0; j < len; ++j) {
      const int64_t first = (o * len + j) * inner;  // the flat index of (o, j, 0)
      for (int64_t k = k0; k < k1;) {
        int64_t rest = k / width, src_k = src_o + j * src_shape.stride[dim], out_k = out_o;
        for (int64_t d = nd - 2; d > dim; --d) {
          const int64_t coord = rest % index_shape.size[d];
          rest /= index_shape.size[d];
          src_k += coord * src_shape.stride[d];
          out_k += coord * out_shape.stride[d];
        }
        const int64_t c0 = k % width;
        const int64_t n = std::min(k1 - k, width - c0);
        for (int64_t c = c0; c < c0 + n; ++c) {
          const int64_t i = first + k + (c - c0);
          const int64_t at = index[i];
          STRATA_KERNEL_ASSERT(check, at >= 0 && at < size, i, at, size);
          if (at < 0 || at >= size) continue;
          out[out_k + at * out_shape.stride[dim] + c * out_step] += src[src_k + c * src_step];
        }
        k += n;
      }
    }
  }
};

// Note [Scatter-add adds in one order]
// Floating-point addition is not associative, so an output element that several index entries add into must take
// them in one order, or a run would not give the same bits twice (nor a resumed training run the uninterrupted
// one's: an embedding's gradient is a scatter-add). On a GPU, atomics add in whatever order the threads come, as
// PyTorch's do. On the CPU the work is split by the coordinates other than `dim`, never along it: each output
// element then takes all its additions on one thread, in index order, whatever the number of threads, and needs no
// atomics (two lines with different other coordinates write different elements).
template <typename T>
void scatter_add_on_cpu(const kernels::LaunchSite& site, const ScatterAddBody<T>& body) {
  const SmallShape& shape = body.index_shape;
  const int64_t len = shape.ndim == 0 ? 1 : shape.size[body.dim];
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < shape.ndim; ++d) {
    if (d < body.dim) outer *= shape.size[d];
    if (d > body.dim) inner *= shape.size[d];
  }
  if (shape.ndim == 0) {
    body(0);
  } else {
    // Lines u = o * inner + k; a range of them is cut where o changes.
    const auto lines = [&](int64_t begin, int64_t end) {
      while (begin < end) {
        const int64_t o = begin / inner, k0 = begin % inner;
        const int64_t k1 = std::min(inner, k0 + (end - begin));
        body.cpu_lines(o, k0, k1);
        begin += k1 - k0;
      }
    };
    if (outer * inner * len < kernels::kCpuGrain) {
      lines(0, outer * inner);
    } else {
      // One run of lines per thread: a thread that walks a few lines through every index entry reads memory at a
      // stride, so it takes as many lines as it can have.
      const int64_t per_thread = (outer * inner + num_threads() - 1) / num_threads();
      parallel_for(outer * inner, std::max(kernels::kCpuGrain / len, per_thread), lines);
    }
  }
  kernels::detail::after_cpu_launch(site);
}

template <typename T>
struct ScatterAdd {
  static void run(const ops::OpCall& call, const TensorView& out, const TensorView& index, const TensorView& src,
                  int64_t dim) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t> ||
                  std::is_same_v<T, int64_t>) {
      const kernels::LaunchSite site = site_of(call, "scatter_add");
      const ScatterAddBody<T> body{out.ptr<T>(),
                                   index.ptr<int64_t>(),
                                   src.ptr<T>(),
                                   SmallShape::of(index),
                                   SmallShape::of(out),
                                   SmallShape::of(src),
                                   dim,
                                   site.asserts("index out of range for the scattered dimension")};
      if (site.device.is_cpu()) {
        scatter_add_on_cpu(site, body);
      } else {
        kernels::forall(site, index.numel(), body);
      }
    } else {
      STRATA_THROW(DTypeError, "{}: dtype {} is not supported; use f32, f64, i32 or i64", call.op, dtype_of<T>);
    }
  }
};

inline void scatter_add_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& index,
                               const TensorView& src, int64_t dim) {
  kernels::dispatch<ScatterAdd>(out.dtype, call, out, index, src, dim);
}

struct OneHotBody {
  int64_t* out;
  const int64_t* labels;
  int64_t classes;
  KernelAssertContext check;
  STRATA_HOST_DEVICE void operator()(int64_t n) const {
    const int64_t c = labels[n];
    STRATA_KERNEL_ASSERT(check, c >= 0 && c < classes, n, c, classes);
    if (c >= 0 && c < classes) out[n * classes + c] = 1;
  }
};

inline void one_hot_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& labels,
                           int64_t num_classes) {
  const kernels::LaunchSite site = site_of(call, "one_hot");
  kernels::forall(site, labels.numel(),
                  OneHotBody{out.ptr<int64_t>(), labels.ptr<int64_t>(), num_classes,
                             site.asserts("class label out of range [0, num_classes)")});
}

// Note [topk without scratch memory]
// One thread per row keeps the row's best k so far in its rows of the outputs, best first, and inserts each element
// that beats the last kept one by shifting the worse ones down. That needs no memory beyond the outputs on any device
// and is O(size * k) at worst (a row sorted worst first); on rows in no particular order an element past the first
// k is rarely inserted, so the usual cost is one comparison per element. Sampling's rows (a vocabulary, k up to a
// few hundred) are that case.
template <typename T>
struct TopkBody {
  using M = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
  T* values;
  int64_t* indices;
  const T* in;
  int64_t size, k;
  bool largest;
  /// Whether (a at ia) comes before (b at ib): NaN is the largest value; ties keep the row's order.
  STRATA_HOST_DEVICE bool before(M a, int64_t ia, M b, int64_t ib) const {
    const bool a_nan = a != a, b_nan = b != b;  // never true for integers
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return ia < ib;
      return largest ? a_nan : b_nan;
    }
    if (a == b) return ia < ib;
    return largest ? a > b : a < b;
  }
  STRATA_HOST_DEVICE void operator()(int64_t row) const {
    T* v = values + row * k;
    int64_t* idx = indices + row * k;
    const T* x = in + row * size;
    int64_t kept = 0;
    for (int64_t j = 0; j < size; ++j) {
      const M value = static_cast<M>(x[j]);
      if (kept == k && !before(value, j, static_cast<M>(v[k - 1]), idx[k - 1])) continue;
      int64_t p = kept < k ? kept++ : k - 1;
      while (p > 0 && before(value, j, static_cast<M>(v[p - 1]), idx[p - 1])) {
        v[p] = v[p - 1];
        idx[p] = idx[p - 1];
        --p;
      }
      v[p] = x[j];
      idx[p] = j;
    }
  }
};

template <typename T>
struct Topk {
  static void run(const ops::OpCall& call, const TensorView& values, const TensorView& indices, const TensorView& in,
                  int64_t k, bool largest) {
    if constexpr (std::is_same_v<T, bool>) {
      STRATA_THROW(DTypeError, "{}: not supported for bool tensors", call.op);
    } else {
      const int64_t size = in.shape[in.dim() - 1];
      kernels::forall(site_of(call, "topk"), in.numel() / size,
                      TopkBody<T>{values.ptr<T>(), indices.ptr<int64_t>(), in.ptr<T>(), size, k, largest});
    }
  }
};

inline void topk_kernel(const ops::OpCall& call, const TensorView& values, const TensorView& indices,
                        const TensorView& in, int64_t k, bool largest) {
  kernels::dispatch<Topk>(in.dtype, call, values, indices, in, k, largest);
}

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
