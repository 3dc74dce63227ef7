// Elementwise ops with broadcasting and type promotion. Validation and dtype/shape inference happen here, once;
// the kernels are written once in backends/portable/elementwise_ops.h.

#include <optional>

#include "strata/core/error.h"
#include "strata/ops/checks.h"
#include "strata/ops/elementwise_kernels.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"

namespace strata {

namespace {

const ops::KernelSlot<ops::AddFn> add_slot("add");
const ops::KernelSlot<ops::BinaryFn> mul_slot("mul"), div_slot("div"), pow_slot("pow"), maximum_slot("maximum"),
    minimum_slot("minimum"), eq_slot("eq"), ne_slot("ne"), lt_slot("lt"), le_slot("le"), and_slot("logical_and"),
    or_slot("logical_or"), xor_slot("logical_xor");
const ops::KernelSlot<ops::ScalarFn> add_scalar_slot("add_scalar"), rsub_scalar_slot("rsub_scalar"),
    mul_scalar_slot("mul_scalar"), div_scalar_slot("div_scalar"), rdiv_scalar_slot("rdiv_scalar"),
    pow_scalar_slot("pow_scalar");
const ops::KernelSlot<ops::UnaryFn> neg_slot("neg"), abs_slot("abs"), exp_slot("exp"), log_slot("log"),
    sqrt_slot("sqrt"), rsqrt_slot("rsqrt"), tanh_slot("tanh"), sigmoid_slot("sigmoid"), relu_slot("relu"),
    gelu_slot("gelu"), not_slot("logical_not");
const ops::KernelSlot<ops::ClampFn> clamp_slot("clamp");
const ops::KernelSlot<ops::WhereFn> where_slot("where");

// --- dtypes (PyTorch's rules) ---

/// bool < integral < floating: a scalar changes a tensor's dtype only when it is of a higher category.
int category(DType dtype) { return dtype == DType::Bool ? 0 : is_floating(dtype) ? 2 : 1; }
int category(const Scalar& s) { return s.kind() == Scalar::Kind::Bool ? 0 : s.is_floating() ? 2 : 1; }

/// The dtype of `tensor op scalar`: f16 tensor + 2.5 -> f16, i32 tensor + 2.5 -> f32, bool tensor + 1 -> i64.
DType result_type(DType tensor, const Scalar& s) { return category(s) > category(tensor) ? s.default_dtype() : tensor; }

/// The dtype of ops that need a floating result (div, exp...): integers and bool compute in f32.
DType floating_type(DType dtype) { return is_floating(dtype) ? dtype : DType::F32; }

/// Whether an in-place op may store a result of dtype `from` into a tensor of dtype `to` (torch.can_cast).
bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  return to != DType::Bool || from == DType::Bool;
}

Scalar negated(const Scalar& s) {
  if (s.is_floating()) return Scalar(-s.to_double());
  return Scalar(static_cast<int64_t>(0ULL - static_cast<std::uint64_t>(s.to_int())));  // wraps like the kernels
}

void check_alpha(const char* op, DType result, const Scalar& alpha) {
  STRATA_CHECK(is_floating(result) || !alpha.is_floating(), DTypeError,
               "{}: alpha {} is a floating-point number, but the result dtype {} is integral", op, alpha.to_double(),
               result);
}

void check_not_bool(const char* op, DType dtype, const char* hint) {
  STRATA_CHECK(dtype != DType::Bool, DTypeError, "{}: not supported for bool tensors{}", op, hint);
}

constexpr const char* kSubBoolHint = "; use logical_xor() for bool tensors, or logical_not() to invert a mask";

// --- operands ---

void check_defined(const char* op, const Tensor& t, int position) {
  STRATA_CHECK(t.defined(), InvalidArgumentError, "{}: argument {} is an undefined tensor", op, position);
}

/// `t` in dtype `dtype`: `t` itself, or a converted copy kept alive by `holder`.
const Tensor& in_dtype(const Tensor& t, DType dtype, Tensor& holder) {
  if (t.dtype() == dtype) return t;
  holder = t.to(dtype);
  return holder;
}

/// What a kernel reads of `t`: its view, broadcast to `shape` (stride 0 on broadcast dimensions).
TensorView input_view(const char* op, const Tensor& t, const Shape& shape) {
  TensorView v = t.view();
  if (v.shape == shape) return v;
  return ops::broadcast_to(op, v, shape);
}

/// Checks that both operands exist and share a device; returns the shape they broadcast to.
Shape binary_shape(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a, 0);
  check_defined(op, b, 1);
  if (a.device() != b.device()) {
    const TensorView av = a.view(), bv = b.view();
    ops::check_same_device(op, {&av, &bv});
  }
  return a.shape() == b.shape() ? a.shape() : ops::broadcast_shapes(op, a.shape(), b.shape());
}

/// A new tensor kernel(a, b, extra...) computed in `compute` and stored as `out_dtype`. With `swap` the kernel
/// gets (b, a): gt(a, b) is lt(b, a). Errors name `a` as argument 0 either way.
template <typename Fn, typename... Extra>
Tensor binary_to(const char* op, const ops::KernelSlot<Fn>& slot, const Tensor& a, const Tensor& b, DType compute,
                 DType out_dtype, bool swap, const Extra&... extra) {
  const Shape shape = binary_shape(op, a, b);
  const Device device = a.device();
  const OpScope scope(op);  // names the op in an out-of-memory error
  Tensor out = empty(shape, TensorOptions(out_dtype).device(device));
  if (out.numel() == 0) return out;
  Tensor a_holder, b_holder;
  const TensorView av = input_view(op, in_dtype(a, compute, a_holder), shape);
  const TensorView bv = input_view(op, in_dtype(b, compute, b_holder), shape);
  slot.get(device)(detail::op_call(op, device), out.view(), swap ? bv : av, swap ? av : bv, extra...);
  return out;
}

/// binary_to with the result in the compute dtype.
template <typename Fn, typename... Extra>
Tensor binary(const char* op, const ops::KernelSlot<Fn>& slot, const Tensor& a, const Tensor& b, DType compute,
              const Extra&... extra) {
  return binary_to(op, slot, a, b, compute, compute, false, extra...);
}

/// In-place ops write self, so self must not have elements that share memory (an expanded tensor).
void check_writable(const char* op, const Tensor& self) {
  const Shape& shape = self.shape();
  const Strides& strides = self.strides();
  for (std::size_t d = 0; d < shape.size(); ++d) {
    STRATA_CHECK(strides[d] != 0 || shape[d] <= 1, InvalidArgumentError,
                 "{}: self (shape {}, strides {}) has elements that share memory, so it cannot be written in place; "
                 "clone() it first",
                 op, self.shape(), self.strides());
  }
}

/// Whether `other` reads memory of `self` at other positions than self's own elements (a += a.t()).
bool overlaps_elsewhere(const Tensor& self, const Tensor& other) {
  return other.shares_storage(self) &&
         !(other.offset() == self.offset() && other.shape() == self.shape() && other.strides() == self.strides());
}

/// self = kernel(self, other, extra...) computed in `compute`; the result must keep self's shape and fit its dtype.
template <typename Fn, typename... Extra>
Tensor& binary_in_place(const char* op, const ops::KernelSlot<Fn>& slot, Tensor& self, const Tensor& other,
                        DType compute, const Extra&... extra) {
  const Shape shape = binary_shape(op, self, other);
  STRATA_CHECK(shape == self.shape(), ShapeError,
               "{}: self {} and other {} broadcast to {}, but an in-place op must keep self's shape {}", op,
               self.shape(), other.shape(), shape, self.shape());
  STRATA_CHECK(can_cast(compute, self.dtype()), DTypeError,
               "{}: the result dtype {} (of self {} and other {}) cannot be stored in self's dtype {}", op, compute,
               self.dtype(), other.dtype(), self.dtype());
  check_writable(op, self);
  if (self.numel() == 0) return self;
  Tensor holder;
  const Tensor& b = in_dtype(other, compute, holder);
  if (compute != self.dtype() || overlaps_elsewhere(self, b)) {
    // Compute into new memory first, then store (converting to self's dtype).
    self.copy_(binary_to(op, slot, self, other, compute, compute, false, extra...));
    return self;
  }
  const TensorView sv = self.view();
  slot.get(self.device())(detail::op_call(op, self.device()), sv, sv, input_view(op, b, shape), extra...);
  return self;
}

/// A new tensor kernel(a, extra...) of a's shape, computed in `compute` and stored as `out_dtype`.
template <typename Fn, typename... Extra>
Tensor unary(const char* op, const ops::KernelSlot<Fn>& slot, const Tensor& a, DType compute, DType out_dtype,
             const Extra&... extra) {
  check_defined(op, a, 0);
  const Device device = a.device();
  const OpScope scope(op);
  Tensor out = empty(a.shape(), TensorOptions(out_dtype).device(device));
  if (out.numel() == 0) return out;
  Tensor holder;
  slot.get(device)(detail::op_call(op, device), out.view(), in_dtype(a, compute, holder).view(), extra...);
  return out;
}

/// self = kernel(self, extra...), whose result dtype `compute` must fit self's dtype.
template <typename Fn, typename... Extra>
Tensor& unary_in_place(const char* op, const ops::KernelSlot<Fn>& slot, Tensor& self, DType compute,
                       const Extra&... extra) {
  check_defined(op, self, 0);
  STRATA_CHECK(can_cast(compute, self.dtype()), DTypeError,
               "{}: the result dtype {} cannot be stored in self's dtype {}", op, compute, self.dtype());
  check_writable(op, self);
  if (self.numel() == 0) return self;
  if (compute != self.dtype()) {
    self.copy_(unary(op, slot, self, compute, compute, extra...));
    return self;
  }
  const TensorView sv = self.view();
  slot.get(self.device())(detail::op_call(op, self.device()), sv, sv, extra...);
  return self;
}

/// The dtype of clamp(a, lo, hi): as `a op lo op hi` for the bounds that are given.
DType clamp_type(const char* op, const Tensor& a, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  check_defined(op, a, 0);
  STRATA_CHECK(lo || hi, InvalidArgumentError, "{}: at least one of min and max must be given", op);
  check_not_bool(op, a.dtype(), "");
  DType dtype = a.dtype();
  if (lo) dtype = result_type(dtype, *lo);
  if (hi) dtype = result_type(dtype, *hi);
  return dtype;
}

DType pow_type(const Tensor& a, const Scalar& exponent) {
  const DType dtype = result_type(a.dtype(), exponent);
  check_not_bool("pow", dtype, "");
  STRATA_CHECK(is_floating(dtype) || exponent.to_int() >= 0, InvalidArgumentError,
               "pow: integers to negative integer powers are not allowed ({} tensor, exponent {})", a.dtype(),
               exponent.to_int());
  return dtype;
}

}  // namespace

// --- arithmetic ---

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  const DType dtype = promote_types(a.dtype(), b.dtype());
  check_alpha("add", dtype, alpha);
  return binary("add", add_slot, a, b, dtype, alpha);
}

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_not_bool("sub", a.dtype(), kSubBoolHint);
  check_not_bool("sub", b.dtype(), kSubBoolHint);
  const DType dtype = promote_types(a.dtype(), b.dtype());
  check_alpha("sub", dtype, alpha);
  return binary("sub", add_slot, a, b, dtype, negated(alpha));
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary("mul", mul_slot, a, b, promote_types(a.dtype(), b.dtype()));
}

Tensor div(const Tensor& a, const Tensor& b) {
  return binary("div", div_slot, a, b, floating_type(promote_types(a.dtype(), b.dtype())));
}

Tensor pow(const Tensor& a, const Tensor& b) {
  const DType dtype = promote_types(a.dtype(), b.dtype());
  check_not_bool("pow", dtype, "");
  return binary("pow", pow_slot, a, b, dtype);
}

Tensor pow(const Tensor& a, const Scalar& exponent) {
  const DType dtype = pow_type(a, exponent);
  return unary("pow", pow_scalar_slot, a, dtype, dtype, exponent);
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary("maximum", maximum_slot, a, b, promote_types(a.dtype(), b.dtype()));
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary("minimum", minimum_slot, a, b, promote_types(a.dtype(), b.dtype()));
}

// --- unary ---

Tensor neg(const Tensor& a) {
  check_not_bool("neg", a.dtype(), "; use logical_not() to invert a mask");
  return unary("neg", neg_slot, a, a.dtype(), a.dtype());
}

Tensor abs(const Tensor& a) {
  check_not_bool("abs", a.dtype(), "");
  return unary("abs", abs_slot, a, a.dtype(), a.dtype());
}

// Transcendental ops compute integers and bool in f32, as PyTorch does.
#define STRATA_FLOATING_UNARY(name)                    \
  Tensor name(const Tensor& a) {                       \
    const DType dtype = floating_type(a.dtype());      \
    return unary(#name, name##_slot, a, dtype, dtype); \
  }
STRATA_FLOATING_UNARY(exp)
STRATA_FLOATING_UNARY(log)
STRATA_FLOATING_UNARY(sqrt)
STRATA_FLOATING_UNARY(rsqrt)
STRATA_FLOATING_UNARY(tanh)
STRATA_FLOATING_UNARY(sigmoid)
STRATA_FLOATING_UNARY(gelu)
#undef STRATA_FLOATING_UNARY

Tensor relu(const Tensor& a) {
  check_not_bool("relu", a.dtype(), "");
  return unary("relu", relu_slot, a, a.dtype(), a.dtype());
}

Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max) {
  const DType dtype = clamp_type("clamp", a, min, max);
  return unary("clamp", clamp_slot, a, dtype, dtype, min, max);
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  constexpr const char* op = "where";
  check_defined(op, condition, 0);
  check_defined(op, a, 1);
  check_defined(op, b, 2);
  const TensorView cv = condition.view(), av = a.view(), bv = b.view();
  ops::check_same_device(op, {&cv, &av, &bv});
  STRATA_CHECK(condition.dtype() == DType::Bool, DTypeError, "{}: the condition must be a bool tensor, got {}", op,
               condition.dtype());
  const Shape shape = ops::broadcast_shapes(op, ops::broadcast_shapes(op, condition.shape(), a.shape()), b.shape());
  const DType dtype = promote_types(a.dtype(), b.dtype());
  const OpScope scope(op);
  Tensor out = empty(shape, TensorOptions(dtype).device(a.device()));
  if (out.numel() == 0) return out;
  Tensor a_holder, b_holder;
  where_slot.get(a.device())(detail::op_call(op, a.device()), out.view(), input_view(op, condition, shape),
                             input_view(op, in_dtype(a, dtype, a_holder), shape),
                             input_view(op, in_dtype(b, dtype, b_holder), shape));
  return out;
}

// --- comparisons and logic: computed in the promoted dtype, bool results ---

Tensor eq(const Tensor& a, const Tensor& b) {
  return binary_to("eq", eq_slot, a, b, promote_types(a.dtype(), b.dtype()), DType::Bool, false);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return binary_to("ne", ne_slot, a, b, promote_types(a.dtype(), b.dtype()), DType::Bool, false);
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return binary_to("lt", lt_slot, a, b, promote_types(a.dtype(), b.dtype()), DType::Bool, false);
}
Tensor le(const Tensor& a, const Tensor& b) {
  return binary_to("le", le_slot, a, b, promote_types(a.dtype(), b.dtype()), DType::Bool, false);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return binary_to("gt", lt_slot, a, b, promote_types(a.dtype(), b.dtype()), DType::Bool, true);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return binary_to("ge", le_slot, a, b, promote_types(a.dtype(), b.dtype()), DType::Bool, true);
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return binary_to("logical_and", and_slot, a, b, promote_types(a.dtype(), b.dtype()), DType::Bool, false);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return binary_to("logical_or", or_slot, a, b, promote_types(a.dtype(), b.dtype()), DType::Bool, false);
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return binary_to("logical_xor", xor_slot, a, b, promote_types(a.dtype(), b.dtype()), DType::Bool, false);
}
Tensor logical_not(const Tensor& a) { return unary("logical_not", not_slot, a, a.dtype(), DType::Bool); }

// --- in place ---

Tensor& add_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  const DType dtype = promote_types(self.dtype(), other.dtype());
  check_alpha("add_", dtype, alpha);
  return binary_in_place("add_", add_slot, self, other, dtype, alpha);
}

Tensor& sub_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  check_not_bool("sub_", self.dtype(), kSubBoolHint);
  check_not_bool("sub_", other.dtype(), kSubBoolHint);
  const DType dtype = promote_types(self.dtype(), other.dtype());
  check_alpha("sub_", dtype, alpha);
  return binary_in_place("sub_", add_slot, self, other, dtype, negated(alpha));
}

Tensor& mul_(Tensor& self, const Tensor& other) {
  return binary_in_place("mul_", mul_slot, self, other, promote_types(self.dtype(), other.dtype()));
}

Tensor& div_(Tensor& self, const Tensor& other) {
  return binary_in_place("div_", div_slot, self, other, floating_type(promote_types(self.dtype(), other.dtype())));
}

Tensor& relu_(Tensor& self) {
  check_not_bool("relu_", self.dtype(), "");
  return unary_in_place("relu_", relu_slot, self, self.dtype());
}

Tensor& clamp_(Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max) {
  return unary_in_place("clamp_", clamp_slot, self, clamp_type("clamp_", self, min, max), min, max);
}

// --- operators with a scalar: the scalar goes to the kernel by value, it never becomes a tensor ---

Tensor operator+(const Tensor& a, const Scalar& b) {
  const DType dtype = result_type(a.dtype(), b);
  return unary("add", add_scalar_slot, a, dtype, dtype, b);
}

Tensor operator-(const Tensor& a, const Scalar& b) {
  check_not_bool("sub", a.dtype(), kSubBoolHint);
  check_not_bool("sub", b.default_dtype(), kSubBoolHint);
  const DType dtype = result_type(a.dtype(), b);
  return unary("sub", add_scalar_slot, a, dtype, dtype, negated(b));
}

Tensor operator*(const Tensor& a, const Scalar& b) {
  const DType dtype = result_type(a.dtype(), b);
  return unary("mul", mul_scalar_slot, a, dtype, dtype, b);
}

Tensor operator/(const Tensor& a, const Scalar& b) {
  const DType dtype = floating_type(result_type(a.dtype(), b));
  return unary("div", div_scalar_slot, a, dtype, dtype, b);
}

Tensor operator+(const Scalar& a, const Tensor& b) { return b + a; }
Tensor operator*(const Scalar& a, const Tensor& b) { return b * a; }

Tensor operator-(const Scalar& a, const Tensor& b) {
  check_not_bool("sub", b.dtype(), kSubBoolHint);
  check_not_bool("sub", a.default_dtype(), kSubBoolHint);
  const DType dtype = result_type(b.dtype(), a);
  return unary("sub", rsub_scalar_slot, b, dtype, dtype, a);
}

Tensor operator/(const Scalar& a, const Tensor& b) {
  const DType dtype = floating_type(result_type(b.dtype(), a));
  return unary("div", rdiv_scalar_slot, b, dtype, dtype, a);
}

}  // namespace strata
