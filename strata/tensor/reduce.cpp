// Reductions and softmax: validation, output shapes and dtypes here, once; the kernels (backends/portable/
// reduce_ops.h) see the input permuted so that the reduced dims come last (Note [Reductions reduce trailing dims]).

#include <cmath>

#include "strata/core/error.h"
#include "strata/ops/checks.h"
#include "strata/ops/reduce_kernels.h"
#include "strata/tensor/autocast.h"
#include "strata/tensor/autograd_support.h"
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

// --- derivatives (Note [Autograd hooks in the tensors layer]); they run under NoGradGuard ---

using detail::unreduce;

/// The number of elements each output element of a reduction of `a` over `dims` combines.
int64_t reduced_count(const char* op, const Tensor& a, const std::vector<int64_t>& dims) {
  const std::vector<bool> mask = reduced_mask(op, a, dims);
  int64_t count = 1;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (mask[static_cast<std::size_t>(d)]) count *= a.size(d);
  }
  return count;
}

// Note [Gradient of max and min over dims]
// The gradient of max/min goes to every position that attains the extremum, divided evenly among ties (as
// torch.amax/amin), so that it is the same whichever tie a kernel happens to pick.
Tensor extremum_grad(const Tensor& g, const Tensor& a, const Tensor& out, const std::vector<int64_t>& dims,
                     bool keepdim) {
  const Tensor hits = eq(a, unreduce(out, a.shape(), dims, keepdim)).to(a.dtype());
  const Tensor count = sum(hits, dims, /*keepdim=*/true);
  return hits * unreduce(g, a.shape(), dims, keepdim) / count;
}

}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  constexpr const char* op = "sum";
  const DType out = is_integral(a.dtype()) ? DType::I64 : a.dtype();  // as PyTorch: integers and bool sum to i64
  Tensor result = reduce(op, a, reduced_mask(op, a, dims), keepdim, out, params_of(ReduceOp::Sum), false);
  if (detail::needs_grad({&a})) {
    detail::record(
        op, {&a}, result,
        [shape = a.shape(), dtype = a.dtype(), dims, keepdim](const Tensor& g) {
          Tensor spread = unreduce(g, shape, dims, keepdim);
          return std::vector<Tensor>{spread.dtype() == dtype ? spread : spread.to(dtype)};
        },
        detail::Saves::kNothing);
  }
  return result;
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  constexpr const char* op = "mean";
  check_floating(op, a);
  Tensor out = reduce(op, a, reduced_mask(op, a, dims), keepdim, a.dtype(), params_of(ReduceOp::Mean), false);
  if (detail::needs_grad({&a})) {
    const auto count = static_cast<double>(reduced_count(op, a, dims));
    detail::record(
        op, {&a}, out,
        [shape = a.shape(), dims, keepdim, count](const Tensor& g) {
          return std::vector<Tensor>{unreduce(g, shape, dims, keepdim) / count};
        },
        detail::Saves::kNothing);
  }
  return out;
}

Tensor max(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor out = extremum("max", ReduceOp::Max, a, dims, keepdim);
  if (detail::needs_grad({&a})) {
    detail::record(
        "max", {&a}, out,
        [a, out = out.detach(), dims, keepdim](const Tensor& g) {
          return std::vector<Tensor>{extremum_grad(g, a, out, dims, keepdim)};
        },
        detail::Saves::kInputsAndOutput);
  }
  return out;
}

Tensor min(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor out = extremum("min", ReduceOp::Min, a, dims, keepdim);
  if (detail::needs_grad({&a})) {
    detail::record(
        "min", {&a}, out,
        [a, out = out.detach(), dims, keepdim](const Tensor& g) {
          return std::vector<Tensor>{extremum_grad(g, a, out, dims, keepdim)};
        },
        detail::Saves::kInputsAndOutput);
  }
  return out;
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
  Tensor out = reduce(op, a, reduced_mask(op, a, dims), keepdim, a.dtype(), p, false);
  if (detail::needs_grad({&a})) {
    // d var / d x_i = 2 (x_i - mean) / (N - correction)
    const double denom = static_cast<double>(reduced_count(op, a, dims)) - p.correction;
    detail::record(op, {&a}, out, [a, dims, keepdim, denom](const Tensor& g) {
      const Tensor centered = a - mean(a, dims, /*keepdim=*/true);
      return std::vector<Tensor>{unreduce(g, a.shape(), dims, keepdim) * centered * (2.0 / denom)};
    });
  }
  return out;
}

Tensor norm(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim) {
  constexpr const char* op = "norm";
  check_floating(op, a);
  STRATA_CHECK(!std::isnan(p), InvalidArgumentError, "{}: the order p must be a number, got NaN", op);
  ops::ReduceParams params = params_of(ReduceOp::Norm);
  params.p = p;
  // max/min of |x| have no identity: as in PyTorch, the inf-norms of nothing are errors.
  Tensor out = reduce(op, a, reduced_mask(op, a, dims), keepdim, a.dtype(), params, std::isinf(p));
  if (detail::needs_grad({&a})) {
    STRATA_CHECK(std::isfinite(p) && p >= 1.0, NotImplementedError,
                 "{}: the gradient is implemented for finite p >= 1 only, got p = {}", op, p);
    // d ||x||_p / d x_i = sign(x_i) |x_i|^(p-1) / ||x||_p^(p-1); 0 where the norm is 0.
    detail::record(
        op, {&a}, out,
        [a, out = out.detach(), p, dims, keepdim](const Tensor& g) {
          const Tensor n = unreduce(out, a.shape(), dims, keepdim);
          const Tensor zero = scalar_tensor(0, TensorOptions(a.dtype()).device(a.device()));
          const Tensor safe_n = where(eq(n, zero), scalar_tensor(1, TensorOptions(a.dtype()).device(a.device())), n);
          Tensor d = p == 2.0 ? a / safe_n : a * pow(abs(a), p - 2.0) / pow(safe_n, p - 1.0);
          if (p != 2.0) d = where(eq(a, zero), zero, d);  // |x|^(p-2) is infinite at 0 for p < 2
          return std::vector<Tensor>{where(eq(n, zero), zero, unreduce(g, a.shape(), dims, keepdim) * d)};
        },
        detail::Saves::kInputsAndOutput);
  }
  return out;
}

Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  constexpr const char* op = "logsumexp";
  // As PyTorch 2: integer inputs are computed (and returned) in the default floating dtype.
  const Tensor x = is_floating(a.dtype()) || !a.defined() ? a : a.to(DType::F32);
  Tensor out = reduce(op, x, reduced_mask(op, x, dims), keepdim, x.dtype(), params_of(ReduceOp::LogSumExp), false);
  if (detail::needs_grad({&x})) {
    detail::record(
        op, {&x}, out,
        [x, out = out.detach(), dims, keepdim](const Tensor& g) {
          return std::vector<Tensor>{unreduce(g, x.shape(), dims, keepdim) *
                                     exp(x - unreduce(out, x.shape(), dims, keepdim))};
        },
        detail::Saves::kInputsAndOutput);
  }
  return out;
}

Tensor softmax(const Tensor& a, int64_t dim) {
  if (auto cast = amp::detail::f32_operands({&a})) return softmax((*cast)[0], dim);
  Tensor out = softmax_impl("softmax", a, dim, false);
  if (detail::needs_grad({&a})) {
    const std::vector<int64_t> dims{a.dim() == 0 ? 0 : dim};
    detail::record(
        "softmax", {&a}, out,
        [out = out.detach(), dims](const Tensor& g) {
          const Tensor go = g * out;
          return std::vector<Tensor>{go - out * sum(go, dims, /*keepdim=*/true)};
        },
        detail::Saves::kOutput);
  }
  return out;
}

Tensor log_softmax(const Tensor& a, int64_t dim) {
  if (auto cast = amp::detail::f32_operands({&a})) return log_softmax((*cast)[0], dim);
  Tensor out = softmax_impl("log_softmax", a, dim, true);
  if (detail::needs_grad({&a})) {
    const std::vector<int64_t> dims{a.dim() == 0 ? 0 : dim};
    detail::record(
        "log_softmax", {&a}, out,
        [out = out.detach(), dims](const Tensor& g) {
          return std::vector<Tensor>{g - exp(out) * sum(g, dims, /*keepdim=*/true)};
        },
        detail::Saves::kOutput);
  }
  return out;
}

}  // namespace strata
