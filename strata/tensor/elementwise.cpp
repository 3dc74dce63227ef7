// Elementwise ops with broadcasting and type promotion. Validation and dtype/shape inference happen here, once;
// the kernels are written once in backends/portable/elementwise_ops.h.

#include <cmath>
#include <optional>

#include "strata/core/error.h"
#include "strata/ops/checks.h"
#include "strata/ops/elementwise_kernels.h"
#include "strata/runtime/op_scope.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"
#include "strata/tensor/op_checks.h"

namespace strata {

namespace {

const ops::KernelSlot<ops::AddFn> add_slot("add");
const ops::KernelSlot<ops::BinaryFn> mul_slot("mul"), div_slot("div"), pow_slot("pow"), maximum_slot("maximum"),
    minimum_slot("minimum"), eq_slot("eq"), ne_slot("ne"), lt_slot("lt"), le_slot("le"), and_slot("logical_and"),
    or_slot("logical_or"), xor_slot("logical_xor"), relu_backward_slot("relu_backward"),
    gelu_backward_slot("gelu_backward"), gelu_tanh_backward_slot("gelu_tanh_backward");
const ops::KernelSlot<ops::ScalarFn> add_scalar_slot("add_scalar"), rsub_scalar_slot("rsub_scalar"),
    mul_scalar_slot("mul_scalar"), div_scalar_slot("div_scalar"), rdiv_scalar_slot("rdiv_scalar"),
    pow_scalar_slot("pow_scalar");
const ops::KernelSlot<ops::UnaryFn> neg_slot("neg"), abs_slot("abs"), exp_slot("exp"), log_slot("log"),
    sqrt_slot("sqrt"), rsqrt_slot("rsqrt"), tanh_slot("tanh"), sigmoid_slot("sigmoid"), relu_slot("relu"),
    gelu_slot("gelu"), not_slot("logical_not"), sin_slot("sin"), cos_slot("cos"), erf_slot("erf"),
    gelu_tanh_slot("gelu_tanh");
const ops::KernelSlot<ops::ClampFn> clamp_slot("clamp");
const ops::KernelSlot<ops::WhereFn> where_slot("where");
const ops::KernelSlot<ops::MaskedFillFn> masked_fill_slot("masked_fill");
const ops::KernelSlot<ops::TriangleFn> triangle_slot("triangle");

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
  if (!(v.shape == shape)) v = ops::broadcast_to(op, v, shape);
  return v;  // one return, so v is built in the caller's variable
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
  detail::check_writable(op, self);
  if (self.numel() == 0) return self;
  self.bump_version();
  Tensor holder;
  const Tensor& b = in_dtype(other, compute, holder);
  if (compute != self.dtype() || detail::overlaps_elsewhere(self, b)) {
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
  detail::check_writable(op, self);
  if (self.numel() == 0) return self;
  self.bump_version();
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

// --- derivatives (Note [Autograd hooks in the tensors layer]); they run under NoGradGuard ---

using detail::grad_like;

/// Records a binary op whose input gradients are g * da and g * db (each summed back to its input's shape).
template <typename Fa, typename Fb>
Tensor& record_binary(const char* op, const Tensor& a, const Tensor& b, Tensor& out, Fa da, Fb db,
                      detail::Saves saves = detail::Saves::kInputs) {
  const bool ra = a.requires_grad(), rb = b.requires_grad();
  // Shapes and dtypes, not the inputs: a derivative that reads an input captures it in da or db itself.
  detail::record(
      op, {&a, &b}, out,
      [sa = a.shape(), ta = a.dtype(), sb = b.shape(), tb = b.dtype(), ra, rb, da, db](const Tensor& g) {
        return std::vector<Tensor>{ra ? grad_like(da(g), sa, ta) : Tensor(), rb ? grad_like(db(g), sb, tb) : Tensor()};
      },
      saves);
  return out;
}

/// Records a unary op whose input gradient is f(g).
template <typename F>
Tensor& record_unary(const char* op, const Tensor& a, Tensor& out, F f, detail::Saves saves = detail::Saves::kInputs) {
  detail::record(
      op, {&a}, out,
      [shape = a.shape(), dtype = a.dtype(), f](const Tensor& g) {
        return std::vector<Tensor>{grad_like(f(g), shape, dtype)};
      },
      saves);
  return out;
}

Tensor zero_of(const Tensor& g) { return scalar_tensor(0, TensorOptions(g.dtype()).device(g.device())); }

/// -1, 0 or 1 as `a` is negative, zero or positive, in g's dtype.
Tensor sign_of(const Tensor& a, const Tensor& g) {
  const Tensor zero = zero_of(g);
  const Tensor one = scalar_tensor(1, TensorOptions(g.dtype()).device(g.device()));
  const Tensor minus_one = scalar_tensor(-1, TensorOptions(g.dtype()).device(g.device()));
  return where(gt(a, zero), one, where(lt(a, zero), minus_one, zero));
}

/// The gradient of maximum/minimum to `a`: g where `a` wins, half of g on ties (as PyTorch).
Tensor extremum_grad(const Tensor& g, const Tensor& wins, const Tensor& ties) {
  return where(wins, g, where(ties, g * 0.5, zero_of(g)));
}

}  // namespace

// --- arithmetic ---

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  const DType dtype = promote_types(a.dtype(), b.dtype());
  check_alpha("add", dtype, alpha);
  Tensor out = binary("add", add_slot, a, b, dtype, alpha);
  if (detail::needs_grad({&a, &b})) {
    record_binary(
        "add", a, b, out, [](const Tensor& g) { return g; },
        [alpha](const Tensor& g) { return alpha.to_double() == 1.0 ? g : g * alpha; }, detail::Saves::kNothing);
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_not_bool("sub", a.dtype(), kSubBoolHint);
  check_not_bool("sub", b.dtype(), kSubBoolHint);
  const DType dtype = promote_types(a.dtype(), b.dtype());
  check_alpha("sub", dtype, alpha);
  Tensor out = binary("sub", add_slot, a, b, dtype, negated(alpha));
  if (detail::needs_grad({&a, &b})) {
    record_binary(
        "sub", a, b, out, [](const Tensor& g) { return g; },
        [alpha](const Tensor& g) { return g * Scalar(-alpha.to_double()); }, detail::Saves::kNothing);
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary("mul", mul_slot, a, b, promote_types(a.dtype(), b.dtype()));
  if (detail::needs_grad({&a, &b})) {
    record_binary("mul", a, b, out, [b](const Tensor& g) { return g * b; }, [a](const Tensor& g) { return g * a; });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary("div", div_slot, a, b, floating_type(promote_types(a.dtype(), b.dtype())));
  if (detail::needs_grad({&a, &b})) {
    record_binary(
        "div", a, b, out, [b](const Tensor& g) { return g / b; },
        [b, out = out.detach()](const Tensor& g) { return -(g * out / b); }, detail::Saves::kInputsAndOutput);
  }
  return out;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  const DType dtype = promote_types(a.dtype(), b.dtype());
  check_not_bool("pow", dtype, "");
  Tensor out = binary("pow", pow_slot, a, b, dtype);
  if (detail::needs_grad({&a, &b})) {
    // d/da = b * a^(b-1); d/db = a^b * log(a) (NaN for a <= 0, as the real logarithm).
    record_binary(
        "pow", a, b, out, [a, b](const Tensor& g) { return g * b * pow(a, b - 1); },
        [a, out = out.detach()](const Tensor& g) { return g * out * log(a); }, detail::Saves::kInputsAndOutput);
  }
  return out;
}

Tensor pow(const Tensor& a, const Scalar& exponent) {
  const DType dtype = pow_type(a, exponent);
  Tensor out = unary("pow", pow_scalar_slot, a, dtype, dtype, exponent);
  if (detail::needs_grad({&a})) {
    const double e = exponent.to_double();
    record_unary("pow", a, out, [a, e](const Tensor& g) { return e == 0.0 ? g * 0.0 : g * e * pow(a, e - 1); });
  }
  return out;
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  Tensor out = binary("maximum", maximum_slot, a, b, promote_types(a.dtype(), b.dtype()));
  if (detail::needs_grad({&a, &b})) {
    record_binary("maximum", a, b, out, [a, b](const Tensor& g) { return extremum_grad(g, gt(a, b), eq(a, b)); },
                  [a, b](const Tensor& g) { return extremum_grad(g, gt(b, a), eq(a, b)); });
  }
  return out;
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  Tensor out = binary("minimum", minimum_slot, a, b, promote_types(a.dtype(), b.dtype()));
  if (detail::needs_grad({&a, &b})) {
    record_binary("minimum", a, b, out, [a, b](const Tensor& g) { return extremum_grad(g, lt(a, b), eq(a, b)); },
                  [a, b](const Tensor& g) { return extremum_grad(g, lt(b, a), eq(a, b)); });
  }
  return out;
}

// --- unary ---

Tensor neg(const Tensor& a) {
  check_not_bool("neg", a.dtype(), "; use logical_not() to invert a mask");
  Tensor out = unary("neg", neg_slot, a, a.dtype(), a.dtype());
  if (detail::needs_grad({&a}))
    record_unary(
        "neg", a, out, [](const Tensor& g) { return -g; }, detail::Saves::kNothing);
  return out;
}

Tensor abs(const Tensor& a) {
  check_not_bool("abs", a.dtype(), "");
  Tensor out = unary("abs", abs_slot, a, a.dtype(), a.dtype());
  if (detail::needs_grad({&a})) record_unary("abs", a, out, [a](const Tensor& g) { return g * sign_of(a, g); });
  return out;
}

// Transcendental ops compute integers and bool in f32, as PyTorch does.
// Each states its derivative as g -> dx from the input `a` and the output `out`.
#define STRATA_FLOATING_UNARY(name, derivative)              \
  Tensor name(const Tensor& a) {                             \
    const DType dtype = floating_type(a.dtype());            \
    Tensor out = unary(#name, name##_slot, a, dtype, dtype); \
    if (detail::needs_grad({&a}))                            \
      record_unary(                                          \
          #name, a, out,                                     \
          [a, out = out.detach()](const Tensor& g) {         \
            (void)a;                                         \
            return derivative;                               \
          },                                                 \
          detail::Saves::kInputsAndOutput);                  \
    return out;                                              \
  }
STRATA_FLOATING_UNARY(exp, g * out)
STRATA_FLOATING_UNARY(log, g / a)
STRATA_FLOATING_UNARY(sqrt, g * 0.5 / out)
STRATA_FLOATING_UNARY(rsqrt, g * out * out * out * -0.5)
STRATA_FLOATING_UNARY(tanh, g * (1.0 - out * out))
STRATA_FLOATING_UNARY(sigmoid, g * out * (1.0 - out))
STRATA_FLOATING_UNARY(sin, g * cos(a))
STRATA_FLOATING_UNARY(cos, -(g * sin(a)))
// erf'(x) = 2 / sqrt(pi) * exp(-x^2).
STRATA_FLOATING_UNARY(erf, g * exp(a * a * -1.0) * 1.1283791670955126)
#undef STRATA_FLOATING_UNARY

// GELU in both forms; each derivative is one kernel of (g, x) (GeluGradOp and GeluTanhGradOp state the formulas).
Tensor gelu(const Tensor& a) { return gelu(a, "none"); }

Tensor gelu(const Tensor& a, std::string_view approximate) {
  STRATA_CHECK(approximate == "none" || approximate == "tanh", InvalidArgumentError,
               "gelu: approximate argument must be either none or tanh, got \"{}\"", approximate);
  const bool exact = approximate == "none";
  const DType dtype = floating_type(a.dtype());
  Tensor out = unary("gelu", exact ? gelu_slot : gelu_tanh_slot, a, dtype, dtype);
  if (detail::needs_grad({&a})) {
    record_unary("gelu", a, out, [a, exact](const Tensor& g) {
      return binary(exact ? "gelu_backward" : "gelu_tanh_backward",
                    exact ? gelu_backward_slot : gelu_tanh_backward_slot, g, a, g.dtype());
    });
  }
  return out;
}

Tensor relu(const Tensor& a) {
  check_not_bool("relu", a.dtype(), "");
  Tensor out = unary("relu", relu_slot, a, a.dtype(), a.dtype());
  if (detail::needs_grad({&a})) {
    record_unary("relu", a, out, [a](const Tensor& g) { return detail::relu_backward(g, a); });
  }
  return out;
}

Tensor detail::relu_backward(const Tensor& g, const Tensor& x) {
  return binary("relu_backward", relu_backward_slot, g, x, g.dtype());
}

Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max) {
  const DType dtype = clamp_type("clamp", a, min, max);
  Tensor out = unary("clamp", clamp_slot, a, dtype, dtype, min, max);
  if (detail::needs_grad({&a})) {
    // The gradient passes where clamping left the value unchanged (bounds included, as PyTorch).
    record_unary(
        "clamp", a, out, [a, out = out.detach()](const Tensor& g) { return where(eq(out, a), g, zero_of(g)); },
        detail::Saves::kInputsAndOutput);
  }
  return out;
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
  if (detail::needs_grad({&a, &b})) {
    // The derivatives read only the condition: a and b are not saved, so that writing into them afterwards (as
    // t[mask] = v and masked_fill_ do, whose results where() computes) leaves backward valid, as in PyTorch.
    record_binary(
        "where", a, b, out, [condition](const Tensor& g) { return where(condition, g, zero_of(g)); },
        [condition](const Tensor& g) { return where(condition, zero_of(g), g); }, detail::Saves::kNothing);
  }
  return out;
}

// --- masked_fill, triu and tril: selections that write a value or zero by position ---

namespace {

void check_mask(const char* op, const Tensor& a, const Tensor& mask) {
  check_defined(op, a, 0);
  check_defined(op, mask, 1);
  STRATA_CHECK(mask.dtype() == DType::Bool, DTypeError, "{}: only bool masks are supported, got a mask of dtype {}", op,
               mask.dtype());
  if (a.device() != mask.device()) {
    const TensorView av = a.view(), mv = mask.view();
    ops::check_same_device(op, {&av, &mv});
  }
}

// PyTorch's rule for the fill value: it must fit the dtype's range (a float into an integral tensor is truncated;
// unsigned types also take negatives down to -max, which wrap; bool takes anything; inf and NaN fit floating
// dtypes only).
void check_fill_value(const char* op, DType dtype, const Scalar& value) {
  if (dtype == DType::Bool || dtype == DType::F64) return;
  const double v = value.to_double();
  bool fits = true;
  if (is_integral(dtype)) {
    const auto [min, max] = detail::integral_range(dtype);
    const double lowest = min == 0 ? -static_cast<double>(max) : static_cast<double>(min);
    if (value.is_floating()) {
      fits = v == v && v >= lowest && v < static_cast<double>(max) + 1.0;
    } else {
      const int64_t i = value.to_int();
      fits = static_cast<double>(i) >= lowest && i <= max;
    }
  } else {
    const double max = dtype == DType::F16    ? 65504.0
                       : dtype == DType::BF16 ? 3.3895313892515355e38
                                              : 3.4028234663852886e38;
    fits = !(std::abs(v) > max) || std::isinf(v);
  }
  STRATA_CHECK(fits, DTypeError, "{}: value {} cannot be converted to dtype {} without overflow", op,
               value.is_floating() ? fmt::format("{}", v) : fmt::format("{}", value.to_int()), dtype);
}

void check_value_tensor(const char* op, const Tensor& value) {
  check_defined(op, value, 2);
  STRATA_CHECK(value.dim() == 0, ShapeError,
               "{}: only a 0-dimensional value tensor is supported, got one with {} dimension(s)", op, value.dim());
}

/// masked_fill's kernel into `out` (a's values, broadcast to out's shape, with value where mask is true).
void masked_fill_into(const char* op, const Tensor& out, const Tensor& a, const Tensor& mask, const Scalar& value) {
  const Shape& shape = out.shape();
  masked_fill_slot.get(out.device())(detail::op_call(op, out.device()), out.view(), input_view(op, a, shape),
                                     input_view(op, mask, shape), value);
}

Tensor triangle(const char* op, const Tensor& a, int64_t diagonal, bool upper) {
  check_defined(op, a, 0);
  STRATA_CHECK(a.dim() >= 2, ShapeError, "{}: input tensor must have at least 2 dimensions, got shape {}", op,
               a.shape());
  const OpScope scope(op);
  Tensor out = empty(a.shape(), TensorOptions(a.dtype()).device(a.device()));
  if (out.numel() == 0) return out;
  triangle_slot.get(a.device())(detail::op_call(op, a.device()), out.view(), a.view(), diagonal, upper);
  if (detail::needs_grad({&a})) {
    // The derivative keeps the same triangle of the gradient.
    record_unary(
        op, a, out, [op, diagonal, upper](const Tensor& g) { return triangle(op, g, diagonal, upper); },
        detail::Saves::kNothing);
  }
  return out;
}

Tensor& triangle_(const char* op, Tensor& self, int64_t diagonal, bool upper) {
  if (detail::records_in_place(op, self, {})) {
    return detail::rebase_history(op, self, triangle(op, self, diagonal, upper));
  }
  check_defined(op, self, 0);
  STRATA_CHECK(self.dim() >= 2, ShapeError, "{}: input tensor must have at least 2 dimensions, got shape {}", op,
               self.shape());
  detail::check_writable(op, self);
  if (self.numel() == 0) return self;
  self.bump_version();
  const TensorView sv = self.view();
  triangle_slot.get(self.device())(detail::op_call(op, self.device()), sv, sv, diagonal, upper);
  return self;
}

}  // namespace

Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value) {
  constexpr const char* op = "masked_fill";
  check_mask(op, a, mask);
  check_fill_value(op, a.dtype(), value);
  // As PyTorch, the result has the shape a and mask broadcast to (masked_fill_ keeps self's).
  const Shape shape = a.shape() == mask.shape() ? a.shape() : ops::broadcast_shapes(op, a.shape(), mask.shape());
  const OpScope scope(op);
  Tensor out = empty(shape, TensorOptions(a.dtype()).device(a.device()));
  if (out.numel() == 0) return out;
  masked_fill_into(op, out, a, mask, value);
  if (detail::needs_grad({&a})) {
    // The filled positions take no gradient; the others pass it through.
    record_unary(
        op, a, out, [mask](const Tensor& g) { return masked_fill(g, mask, 0); }, detail::Saves::kNothing);
  }
  return out;
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, const Tensor& value) {
  constexpr const char* op = "masked_fill";
  check_mask(op, a, mask);
  check_value_tensor(op, value);
  if (!detail::needs_grad({&value})) return masked_fill(a, mask, value.item());
  // A value that requires grad gets the sum of the gradient at the filled positions, which where() gives it.
  return where(mask, value.to(a.device(), a.dtype()), a);
}

Tensor& masked_fill_(Tensor& self, const Tensor& mask, const Scalar& value) {
  constexpr const char* op = "masked_fill_";
  check_mask(op, self, mask);
  const Shape shape =
      self.shape() == mask.shape() ? self.shape() : ops::broadcast_shapes(op, self.shape(), mask.shape());
  STRATA_CHECK(shape == self.shape(), ShapeError,
               "{}: the mask {} must broadcast to self's shape {} (they broadcast to {})", op, mask.shape(),
               self.shape(), shape);
  check_fill_value(op, self.dtype(), value);
  // The derivative reads only the mask, so the result is computed from self itself.
  if (detail::records_in_place(op, self, {&mask}))
    return detail::rebase_history(op, self, masked_fill(self, mask, value));
  detail::check_writable(op, self);
  if (self.numel() == 0) return self;
  self.bump_version();
  if (detail::overlaps_elsewhere(self, mask)) {
    self.copy_(masked_fill(self, mask, value));
    return self;
  }
  masked_fill_into(op, self, self, mask, value);
  return self;
}

Tensor& masked_fill_(Tensor& self, const Tensor& mask, const Tensor& value) {
  constexpr const char* op = "masked_fill_";
  check_mask(op, self, mask);
  check_value_tensor(op, value);
  if (detail::needs_grad({&value}) && detail::records_in_place(op, self, {&mask, &value})) {
    return detail::rebase_history(op, self, masked_fill(self, mask, value));
  }
  return masked_fill_(self, mask, value.item());
}

Tensor triu(const Tensor& a, int64_t diagonal) { return triangle("triu", a, diagonal, true); }
Tensor tril(const Tensor& a, int64_t diagonal) { return triangle("tril", a, diagonal, false); }
Tensor& triu_(Tensor& self, int64_t diagonal) { return triangle_("triu_", self, diagonal, true); }
Tensor& tril_(Tensor& self, int64_t diagonal) { return triangle_("tril_", self, diagonal, false); }

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

// Recorded by rebasing the tensor's history: Note [In-place ops and autograd] (tensor/autograd_support.h). add and
// sub do not read self's values in their derivative, so they take self itself; the others take a copy of it.

Tensor& add_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  if (detail::records_in_place("add_", self, {&other})) {
    return detail::rebase_history("add_", self, add(self, other, alpha));
  }
  const DType dtype = promote_types(self.dtype(), other.dtype());
  check_alpha("add_", dtype, alpha);
  return binary_in_place("add_", add_slot, self, other, dtype, alpha);
}

Tensor& sub_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  if (detail::records_in_place("sub_", self, {&other})) {
    return detail::rebase_history("sub_", self, sub(self, other, alpha));
  }
  check_not_bool("sub_", self.dtype(), kSubBoolHint);
  check_not_bool("sub_", other.dtype(), kSubBoolHint);
  const DType dtype = promote_types(self.dtype(), other.dtype());
  check_alpha("sub_", dtype, alpha);
  return binary_in_place("sub_", add_slot, self, other, dtype, negated(alpha));
}

Tensor& mul_(Tensor& self, const Tensor& other) {
  if (detail::records_in_place("mul_", self, {&other})) {
    return detail::rebase_history("mul_", self, mul(self.clone(), other));
  }
  return binary_in_place("mul_", mul_slot, self, other, promote_types(self.dtype(), other.dtype()));
}

Tensor& div_(Tensor& self, const Tensor& other) {
  if (detail::records_in_place("div_", self, {&other})) {
    return detail::rebase_history("div_", self, div(self.clone(), other));
  }
  return binary_in_place("div_", div_slot, self, other, floating_type(promote_types(self.dtype(), other.dtype())));
}

Tensor& relu_(Tensor& self) {
  if (detail::records_in_place("relu_", self, {})) return detail::rebase_history("relu_", self, relu(self.clone()));
  check_not_bool("relu_", self.dtype(), "");
  return unary_in_place("relu_", relu_slot, self, self.dtype());
}

Tensor& clamp_(Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max) {
  if (detail::records_in_place("clamp_", self, {})) {
    return detail::rebase_history("clamp_", self, clamp(self.clone(), min, max));
  }
  return unary_in_place("clamp_", clamp_slot, self, clamp_type("clamp_", self, min, max), min, max);
}

// --- operators with a scalar: the scalar goes to the kernel by value, it never becomes a tensor ---

Tensor operator+(const Tensor& a, const Scalar& b) {
  const DType dtype = result_type(a.dtype(), b);
  Tensor out = unary("add", add_scalar_slot, a, dtype, dtype, b);
  if (detail::needs_grad({&a}))
    record_unary(
        "add", a, out, [](const Tensor& g) { return g; }, detail::Saves::kNothing);
  return out;
}

Tensor operator-(const Tensor& a, const Scalar& b) {
  check_not_bool("sub", a.dtype(), kSubBoolHint);
  check_not_bool("sub", b.default_dtype(), kSubBoolHint);
  const DType dtype = result_type(a.dtype(), b);
  Tensor out = unary("sub", add_scalar_slot, a, dtype, dtype, negated(b));
  if (detail::needs_grad({&a}))
    record_unary(
        "sub", a, out, [](const Tensor& g) { return g; }, detail::Saves::kNothing);
  return out;
}

Tensor operator*(const Tensor& a, const Scalar& b) {
  const DType dtype = result_type(a.dtype(), b);
  Tensor out = unary("mul", mul_scalar_slot, a, dtype, dtype, b);
  if (detail::needs_grad({&a}))
    record_unary(
        "mul", a, out, [b](const Tensor& g) { return g * b; }, detail::Saves::kNothing);
  return out;
}

Tensor operator/(const Tensor& a, const Scalar& b) {
  const DType dtype = floating_type(result_type(a.dtype(), b));
  Tensor out = unary("div", div_scalar_slot, a, dtype, dtype, b);
  if (detail::needs_grad({&a}))
    record_unary(
        "div", a, out, [b](const Tensor& g) { return g / b; }, detail::Saves::kNothing);
  return out;
}

Tensor operator+(const Scalar& a, const Tensor& b) { return b + a; }
Tensor operator*(const Scalar& a, const Tensor& b) { return b * a; }

Tensor operator-(const Scalar& a, const Tensor& b) {
  check_not_bool("sub", b.dtype(), kSubBoolHint);
  check_not_bool("sub", a.default_dtype(), kSubBoolHint);
  const DType dtype = result_type(b.dtype(), a);
  Tensor out = unary("sub", rsub_scalar_slot, b, dtype, dtype, a);
  if (detail::needs_grad({&b}))
    record_unary(
        "rsub", b, out, [](const Tensor& g) { return -g; }, detail::Saves::kNothing);
  return out;
}

Tensor operator/(const Scalar& a, const Tensor& b) {
  const DType dtype = floating_type(result_type(b.dtype(), a));
  Tensor out = unary("div", rdiv_scalar_slot, b, dtype, dtype, a);
  if (detail::needs_grad({&b})) {
    record_unary(
        "rdiv", b, out, [b, out = out.detach()](const Tensor& g) { return -(g * out / b); },
        detail::Saves::kInputsAndOutput);
  }
  return out;
}

}  // namespace strata
