#pragma once

#include <optional>

#include "strata/ops/kernel_table.h"

namespace strata::ops {

// Elementwise kernels (written once in backends/portable/elementwise_ops.h). The tensors layer
// (tensor/elementwise.cpp) has promoted the dtypes and broadcast the inputs: every input has the output's shape
// and the compute dtype, except comparisons and logical ops (bool output) and where's condition (bool).
//
// Ops with UnaryFn: "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "erf", "tanh", "sigmoid", "relu",
// "gelu" (exact), "gelu_tanh" (approximate="tanh"), "logical_not". Ops with BinaryFn: "mul", "div", "pow", "maximum",
// "minimum", "eq", "ne", "lt", "le", "logical_and", "logical_or", "logical_xor" (gt and ge are lt and le with the
// operands swapped), and the derivatives "relu_backward", "gelu_backward", "gelu_tanh_backward" (a = the incoming
// gradient, b = the op's input).

/// out = a + alpha * b ("add"; sub is add with -alpha).
using AddFn = void(const OpCall&, const TensorView& out, const TensorView& a, const TensorView& b, const Scalar& alpha);
/// out = a op s ("add_scalar", "mul_scalar", "div_scalar", "pow_scalar") or s op a ("rsub_scalar",
/// "rdiv_scalar"); the scalar is passed to the kernel by value, never through device memory.
using ScalarFn = void(const OpCall&, const TensorView& out, const TensorView& a, const Scalar& s);
/// out = min(max(in, lo), hi) ("clamp"); a missing bound does not clamp; NaN stays NaN.
using ClampFn = void(const OpCall&, const TensorView& out, const TensorView& in, const std::optional<Scalar>& lo,
                     const std::optional<Scalar>& hi);
/// out = condition ? a : b ("where"); condition is bool.
using WhereFn = void(const OpCall&, const TensorView& out, const TensorView& condition, const TensorView& a,
                     const TensorView& b);
/// out = mask ? value : in ("masked_fill"); mask is bool, broadcast to out's shape; out may be in (in place). The
/// value goes to the kernel by value, converted to out's dtype.
using MaskedFillFn = void(const OpCall&, const TensorView& out, const TensorView& in, const TensorView& mask,
                          const Scalar& value);
/// out = in where the element (row i, column j) of the last two dims is kept, else 0 ("triangle"): kept when
/// j - i >= diagonal for triu (`upper`), j - i <= diagonal for tril. out and in have one shape; out may be in.
using TriangleFn = void(const OpCall&, const TensorView& out, const TensorView& in, int64_t diagonal, bool upper);

}  // namespace strata::ops
