// index_select, gather, scatter_add, one_hot, topk: validation here, kernels in backends/portable/indexing_ops.h.

#include <algorithm>
#include <limits>

#include "strata/core/error.h"
#include "strata/ops/checks.h"
#include "strata/ops/indexing_kernels.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"

namespace strata {

namespace {

const ops::KernelSlot<ops::IndexSelectFn> index_select_slot("index_select");
const ops::KernelSlot<ops::GatherFn> gather_slot("gather");
const ops::KernelSlot<ops::ScatterAddFn> scatter_add_slot("scatter_add");
const ops::KernelSlot<ops::OneHotFn> one_hot_slot("one_hot");
const ops::KernelSlot<ops::TopkFn> topk_slot("topk");

// Indices are i64 and contiguous inside the kernels; i32 indices are widened.
Tensor as_index(const char* op, const Tensor& index, const char* what) {
  STRATA_CHECK(index.dtype() == DType::I64 || index.dtype() == DType::I32, DTypeError,
               "{}: {} must be an i64 or i32 tensor, got {}", op, what, index.dtype());
  return index.to(DType::I64).contiguous();
}

}  // namespace

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  constexpr const char* op = "index_select";
  const TensorView av = a.view(), iv = index.view();
  ops::check_same_device(op, {&av, &iv});
  STRATA_CHECK(index.dim() <= 1, ShapeError, "{}: index must be 0-D or 1-D, got shape {}", op, index.shape());
  dim = ops::wrap_dim(op, dim, a.dim());
  STRATA_CHECK(a.dim() > 0, ShapeError, "{}: cannot select from a 0-D tensor", op);
  const Tensor idx = as_index(op, index, "index");
  Shape shape = a.shape();
  shape[dim] = idx.numel();
  Tensor out = empty(shape, TensorOptions(a.dtype()).device(a.device()));
  if (out.numel() == 0) return out;
  STRATA_CHECK(a.size(dim) > 0, IndexError, "{}: index into dimension {} of size 0", op, dim);
  const Tensor in = a.contiguous();
  index_select_slot.get(a.device())(detail::op_call(op, a.device()), out.view(), in.view(), idx.view(), dim);
  if (detail::needs_grad({&a})) {
    // The gradient adds each selected slice back where it came from: scatter_add with the index along `dim`.
    detail::record(op, {&a}, out, [a, idx, dim](const Tensor& g) {
      Shape index_shape(static_cast<std::size_t>(g.dim()), 1);
      index_shape[static_cast<std::size_t>(dim)] = idx.numel();
      const Tensor spread = idx.reshape(index_shape).expand(g.shape());
      return std::vector<Tensor>{scatter_add(zeros(a.shape(), TensorOptions(g.dtype()).device(g.device())), dim,
                                             spread, g.contiguous())};
    });
  }
  return out;
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  constexpr const char* op = "gather";
  const TensorView av = a.view(), iv = index.view();
  ops::check_same_device(op, {&av, &iv});
  dim = ops::wrap_dim(op, dim, a.dim());
  STRATA_CHECK(index.dim() == a.dim(), ShapeError, "{}: index must have as many dimensions as the input ({}), got {}",
               op, a.shape(), index.shape());
  for (int64_t d = 0; d < a.dim(); ++d) {
    STRATA_CHECK(d == dim || index.size(d) <= a.size(d), ShapeError,
                 "{}: index shape {} exceeds input shape {} in dimension {}", op, index.shape(), a.shape(), d);
  }
  const Tensor idx = as_index(op, index, "index");
  Tensor out = empty(index.shape(), TensorOptions(a.dtype()).device(a.device()));
  if (out.numel() == 0) return out;
  const Tensor in = a.contiguous();
  gather_slot.get(a.device())(detail::op_call(op, a.device()), out.view(), in.view(), idx.view(), dim);
  if (detail::needs_grad({&a})) {
    detail::record(op, {&a}, out, [a, idx, dim](const Tensor& g) {
      return std::vector<Tensor>{
          scatter_add(zeros(a.shape(), TensorOptions(g.dtype()).device(g.device())), dim, idx, g.contiguous())};
    });
  }
  return out;
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  constexpr const char* op = "scatter_add";
  const TensorView av = a.view(), iv = index.view(), sv = src.view();
  ops::check_same_device(op, {&av, &iv, &sv});
  dim = ops::wrap_dim(op, dim, a.dim());
  STRATA_CHECK(src.dtype() == a.dtype(), DTypeError, "{}: src has dtype {} but the input has {}", op, src.dtype(),
               a.dtype());
  STRATA_CHECK(index.dim() == a.dim() && src.dim() == a.dim(), ShapeError,
               "{}: input {}, index {} and src {} must have the same number of dimensions", op, a.shape(),
               index.shape(), src.shape());
  for (int64_t d = 0; d < a.dim(); ++d) {
    STRATA_CHECK(index.size(d) <= src.size(d) && (d == dim || index.size(d) <= a.size(d)), ShapeError,
                 "{}: index shape {} exceeds src {} or input {} in dimension {}", op, index.shape(), src.shape(),
                 a.shape(), d);
  }
  const Tensor idx = as_index(op, index, "index");
  Tensor out = a.clone();
  if (idx.numel() == 0) return out;
  const Tensor s = src.contiguous();
  scatter_add_slot.get(a.device())(detail::op_call(op, a.device()), out.view(), idx.view(), s.view(), dim);
  if (detail::needs_grad({&a, &src})) {
    // d/da = g; d/dsrc = g gathered at the index (src positions beyond the index's extent get 0).
    const bool ra = a.requires_grad(), rs = src.requires_grad();
    detail::record(op, {&a, &src}, out, [idx, src, dim, ra, rs](const Tensor& g) {
      Tensor gs;
      if (rs) {
        gs = zeros(src.shape(), TensorOptions(g.dtype()).device(g.device()));
        Tensor part = gs;
        for (int64_t d = 0; d < idx.dim(); ++d) part = part.narrow(d, 0, idx.size(d));
        part.copy_(gather(g, dim, idx));
      }
      return std::vector<Tensor>{ra ? g : Tensor(), gs};
    });
  }
  return out;
}

Tensor one_hot(const Tensor& labels, int64_t num_classes) {
  constexpr const char* op = "one_hot";
  const Tensor idx = as_index(op, labels, "labels");
  if (num_classes < 0) {
    // As in PyTorch: infer from the data (this reads the maximum on the host).
    STRATA_CHECK(idx.numel() > 0, InvalidArgumentError, "{}: cannot infer num_classes from empty labels", op);
    const auto values = idx.to_vector<int64_t>();
    const int64_t max = *std::max_element(values.begin(), values.end());
    STRATA_CHECK(max >= 0 && max < std::numeric_limits<int64_t>::max(), InvalidArgumentError,
                 "{}: cannot infer num_classes from a largest label of {}", op, max);
    num_classes = max + 1;
  }
  STRATA_CHECK(num_classes > 0 || idx.numel() == 0, InvalidArgumentError, "{}: num_classes must be positive, got {}",
               op, num_classes);
  Shape shape = labels.shape();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, TensorOptions(DType::I64).device(labels.device()));
  if (idx.numel() == 0) return out;
  one_hot_slot.get(labels.device())(detail::op_call(op, labels.device()), out.view(), idx.view(), num_classes);
  return out;
}

std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  constexpr const char* op = "topk";
  STRATA_CHECK(a.defined(), InvalidArgumentError, "{}: argument 0 is an undefined tensor", op);
  STRATA_CHECK(a.dtype() != DType::Bool, DTypeError, "{}: not supported for bool tensors", op);
  const bool scalar = a.dim() == 0;
  const Tensor in = scalar ? a.reshape({1}) : a;
  dim = ops::wrap_dim(op, dim, in.dim());
  const int64_t size = in.size(dim);
  STRATA_CHECK(k >= 0 && k <= size, IndexError, "{}: k ({}) is out of range for dimension {} of size {}", op, k, dim,
               size);
  // The kernel takes rows along the last dim; another dim is swapped with the last one and back.
  const int64_t last = in.dim() - 1;
  const Tensor rows = (dim == last ? in : in.transpose(dim, last)).contiguous();
  Shape shape = rows.shape();
  shape[static_cast<std::size_t>(last)] = k;
  Tensor values = empty(shape, TensorOptions(a.dtype()).device(a.device()));
  Tensor indices = empty(shape, TensorOptions(DType::I64).device(a.device()));
  if (values.numel() > 0) {
    topk_slot.get(a.device())(detail::op_call(op, a.device()), values.view(), indices.view(), rows.view(), k, largest);
  }
  if (dim != last) {
    values = values.transpose(dim, last).contiguous();
    indices = indices.transpose(dim, last).contiguous();
  }
  const Tensor in_indices = indices;  // in in's layout, for the derivative
  if (scalar) {                       // a 0-dim input gives 0-dim results for k = 1 (and empty ones for k = 0)
    const Shape out_shape = k == 1 ? Shape{} : Shape{0};
    values = values.reshape(out_shape);
    indices = indices.reshape(out_shape);
  }
  if (detail::needs_grad({&a})) {
    // Each value's gradient goes back to where it was taken from (scatter_add has no f16/bf16 kernel: f32 there).
    detail::record(op, {&a}, values, [in_shape = in.shape(), a_shape = a.shape(), in_indices, dim](const Tensor& g) {
      const DType wide = g.dtype() == DType::F16 || g.dtype() == DType::BF16 ? DType::F32 : g.dtype();
      const Tensor spread = scatter_add(zeros(in_shape, TensorOptions(wide).device(g.device())), dim, in_indices,
                                        g.to(wide).reshape(in_indices.shape()).contiguous());
      return std::vector<Tensor>{spread.to(g.dtype()).reshape(a_shape)};
    });
  }
  return {values, indices};
}

}  // namespace strata
