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
  /// Elements [begin, end) a row of the index's last dimension at a time: the offsets of the row's other
  /// coordinates computed once (kernels::forall on the CPU; an embedding's gradient is rows of one index).
  void cpu_range(int64_t begin, int64_t end) const {
    const int last = index_shape.ndim - 1;
    if (last < 0) {
      for (int64_t i = begin; i < end; ++i) (*this)(i);
      return;
    }
    const int64_t width = index_shape.size[last];
    const int64_t size = out_shape.size[dim];
    while (begin < end) {
      const int64_t c0 = begin % width;
      const int64_t n = std::min(end - begin, width - c0);
      // Offsets of the row's first element, with the coordinate along `dim` left out of out's.
      int64_t rest = begin / width, out_base = 0, src_base = 0;
      for (int d = last - 1; d >= 0; --d) {
        const int64_t coord = rest % index_shape.size[d];
        rest /= index_shape.size[d];
        src_base += coord * src_shape.stride[d];
        if (d != dim) out_base += coord * out_shape.stride[d];
      }
      for (int64_t e = 0; e < n; ++e) {
        const int64_t i = begin + e, c = c0 + e;
        const int64_t at = index[i];
        STRATA_KERNEL_ASSERT(check, at >= 0 && at < size, i, at, size);
        if (at < 0 || at >= size) continue;
        const int64_t out_offset =
            out_base + at * out_shape.stride[dim] + (last == dim ? 0 : c * out_shape.stride[last]);
        kernels::atomic_add(out + out_offset, src[src_base + c * src_shape.stride[last]]);
      }
      begin += n;
    }
  }
};

template <typename T>
struct ScatterAdd {
  static void run(const ops::OpCall& call, const TensorView& out, const TensorView& index, const TensorView& src,
                  int64_t dim) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t> ||
                  std::is_same_v<T, int64_t>) {
      const kernels::LaunchSite site = site_of(call, "scatter_add");
      kernels::forall(site, index.numel(),
                      ScatterAddBody<T>{out.ptr<T>(), index.ptr<int64_t>(), src.ptr<T>(), SmallShape::of(index),
                                        SmallShape::of(out), SmallShape::of(src), dim,
                                        site.asserts("index out of range for the scattered dimension")});
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
