// Reductions and softmax: validation, output shapes and dtypes here, once; the kernels (backends/portable/
// reduce_ops.h) see the input permuted so that the reduced dims come last (Note [Reductions reduce trailing dims]).

#include <cmath>

#include "strata/core/error.h"
#include "strata/ops/checks.h"
#include "strata/ops/reduce_kernels.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"

namespace strata {

namespace {

const ops::KernelSlot<ops::ReduceFn> reduce_slot("reduce");
const ops::KernelSlot<ops::SoftmaxFn> softmax_slot("softmax");

using ops::ReduceOp;

/// Which dims of `a` an op reduces; a 0-d tensor accepts dim 0 / -1 and reduces nothing.
std::vector<bool> reduced_mask(const char* op, const Tensor& a, const std::vector<int64_t>& dims) {
  std::vector<bool> mask(static_cast<std::size_t>(a.dim()), false);
  for (int64_t d : ops::reduction_dims(op, dims, a.dim())) {
    if (d < a.dim()) mask[static_cast<std::size_t>(d)] = true;
  }
  return mask;
}

/// Runs one reduction: out has a's shape without the reduced dims (or with them as 1 when keepdim).
/// `needs_elements`: the op has no identity, so reducing a dimension of size 0 is an error.
Tensor reduce(const char* op, const Tensor& a, const std::vector<bool>& mask, bool keepdim, DType out_dtype,
              ops::ReduceParams params, bool needs_elements) {
  STRATA_CHECK(a.defined(), InvalidArgumentError, "{}: the input tensor is undefined", op);
  Shape kept, out_shape;
  TensorView in = a.view();
  in.shape.resize(0);
  in.strides.resize(0);
  Shape reduced_shape;
  Strides reduced_strides;
  for (int64_t d = 0; d < a.dim(); ++d) {
    const auto i = static_cast<std::size_t>(d);
    if (mask[i]) {
      STRATA_CHECK(!needs_elements || a.size(d) > 0, ShapeError,
                   "{}: cannot reduce over dimension {} of size 0 (input shape {}): the operation has no identity; "
                   "reduce over non-empty dimensions only",
                   op, d, a.shape());
      reduced_shape.push_back(a.size(d));
      reduced_strides.push_back(a.stride(d));
      if (keepdim) out_shape.push_back(1);
    } else {
      kept.push_back(a.size(d));
      in.shape.push_back(a.size(d));
      in.strides.push_back(a.stride(d));
      out_shape.push_back(a.size(d));
    }
  }
  for (std::size_t i = 0; i < reduced_shape.size(); ++i) {
    in.shape.push_back(reduced_shape[i]);
    in.strides.push_back(reduced_strides[i]);
  }
  params.reduced_dims = reduced_shape.ssize();

  Tensor out = empty(out_shape, TensorOptions(out_dtype).device(a.device()));
  if (out.numel() == 0) return out;
  TensorView out_view = out.view();
  out_view.shape = kept;
  out_view.strides = contiguous_strides(kept);
  reduce_slot.get(a.device())(detail::op_call(op, a.device()), out_view, in, params);
  return out;
}

void check_floating(const char* op, const Tensor& a) {
  STRATA_CHECK(is_floating(a.dtype()), DTypeError,
               "{}: input dtype must be a floating point dtype (f16, bf16, f32 or f64), got {}; convert it first, "
               "e.g. a.to(DType::F32)",
               op, a.dtype());
}

ops::ReduceParams params_of(ReduceOp op) {
  ops::ReduceParams p;
  p.op = op;
  return p;
}

Tensor extremum(const char* op, ReduceOp kind, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(op, a, reduced_mask(op, a, dims), keepdim, a.dtype(), params_of(kind), true);
}

Tensor arg_extremum(const char* op, ReduceOp kind, const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  std::vector<int64_t> dims;
  if (dim) dims.push_back(*dim);
  return reduce(op, a, reduced_mask(op, a, dims), keepdim, DType::I64, params_of(kind), true);
}

Tensor softmax_impl(const char* op, const Tensor& a, int64_t dim, bool log) {
  STRATA_CHECK(a.defined(), InvalidArgumentError, "{}: the input tensor is undefined", op);
  check_floating(op, a);
  dim = ops::wrap_dim(op, dim, a.dim());
  Tensor out = empty(a.shape(), TensorOptions(a.dtype()).device(a.device()));
  if (out.numel() == 0) return out;
  // Move `dim` last in both views; a 0-d tensor is one row of one element.
  TensorView in = a.view(), out_view = out.view();
  if (a.dim() == 0) {
    in.shape = {1};
    in.strides = {1};
    out_view.shape = {1};
    out_view.strides = {1};
  } else {
    for (TensorView* v : {&in, &out_view}) {
      const auto i = static_cast<std::size_t>(dim);
      const int64_t size = v->shape[i], stride = v->strides[i];
      v->shape.erase(i);
      v->strides.erase(i);
      v->shape.push_back(size);
      v->strides.push_back(stride);
    }
  }
  softmax_slot.get(a.device())(detail::op_call(op, a.device()), out_view, in, log);
  return out;
}

}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  constexpr const char* op = "sum";
  const DType out = is_integral(a.dtype()) ? DType::I64 : a.dtype();  // as PyTorch: integers and bool sum to i64
  return reduce(op, a, reduced_mask(op, a, dims), keepdim, out, params_of(ReduceOp::Sum), false);
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  constexpr const char* op = "mean";
  check_floating(op, a);
  return reduce(op, a, reduced_mask(op, a, dims), keepdim, a.dtype(), params_of(ReduceOp::Mean), false);
}

Tensor max(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return extremum("max", ReduceOp::Max, a, dims, keepdim);
}

Tensor min(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return extremum("min", ReduceOp::Min, a, dims, keepdim);
}

Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extremum("argmax", ReduceOp::ArgMax, a, dim, keepdim);
}

Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extremum("argmin", ReduceOp::ArgMin, a, dim, keepdim);
}

Tensor var(const Tensor& a, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  constexpr const char* op = "var";
  check_floating(op, a);
  ops::ReduceParams p = params_of(ReduceOp::Var);
  p.correction = unbiased ? 1.0 : 0.0;
  return reduce(op, a, reduced_mask(op, a, dims), keepdim, a.dtype(), p, false);
}

Tensor norm(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim) {
  constexpr const char* op = "norm";
  check_floating(op, a);
  STRATA_CHECK(!std::isnan(p), InvalidArgumentError, "{}: the order p must be a number, got NaN", op);
  ops::ReduceParams params = params_of(ReduceOp::Norm);
  params.p = p;
  // max/min of |x| have no identity: as in PyTorch, the inf-norms of nothing are errors.
  return reduce(op, a, reduced_mask(op, a, dims), keepdim, a.dtype(), params, std::isinf(p));
}

Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  constexpr const char* op = "logsumexp";
  // As PyTorch 2: integer inputs are computed (and returned) in the default floating dtype.
  const Tensor x = is_floating(a.dtype()) || !a.defined() ? a : a.to(DType::F32);
  return reduce(op, x, reduced_mask(op, x, dims), keepdim, x.dtype(), params_of(ReduceOp::LogSumExp), false);
}

Tensor softmax(const Tensor& a, int64_t dim) { return softmax_impl("softmax", a, dim, false); }

Tensor log_softmax(const Tensor& a, int64_t dim) { return softmax_impl("log_softmax", a, dim, true); }

}  // namespace strata
