#pragma once

// The operations of the tensors layer, as free functions and C++ operators. Each validates its arguments once
// in ops/ (devices, shapes, dtypes) and runs the implementation registered for the device type.

#include <optional>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata {

// --- elementwise, with broadcasting and type promotion (tensor/elementwise.cpp) ---
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor gelu(const Tensor& a);  // exact (erf) form
Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
// In place: the result must fit self's shape and dtype.
Tensor& add_(Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& sub_(Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& div_(Tensor& self, const Tensor& other);
Tensor& relu_(Tensor& self);
Tensor& clamp_(Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max);
/// Python's base[index] = value: copies `value` into `view`, a view of `base`, and when autograd records it, makes
/// base's history that of the write (Note [In-place ops and autograd]). Returns base.
Tensor& assign_view(Tensor& base, Tensor view, const Tensor& value);

// --- reductions over dims (empty dims = all); keepdim keeps them as size 1 (tensor/reduce.cpp) ---
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor min(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// Variance with Bessel's correction when `unbiased` (as torch.var's default).
Tensor var(const Tensor& a, const std::vector<int64_t>& dims = {}, bool unbiased = true, bool keepdim = false);
/// p-norm (p = 2 by default) over dims.
Tensor norm(const Tensor& a, double p = 2.0, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);

// --- linear algebra (tensor/linalg.cpp) ---
/// Matrix product with numpy semantics (1-D, 2-D, batched with broadcasting).
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
/// beta * bias + alpha * (a @ b)
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta = 1, const Scalar& alpha = 1);
/// Allow TF32 tensor cores for f32 matrix products on the GPU (off by default, as in PyTorch).
void set_allow_tf32(bool allow);
bool allow_tf32();

// --- indexing with data; out-of-range indices are device-side asserts (tensor/indexing.cpp) ---
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
/// Returns a copy of `a` with src added at `index` along dim.
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor one_hot(const Tensor& labels, int64_t num_classes);

// --- joining (tensor/views.cpp) ---
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// The shape both shapes broadcast to; throws ShapeError naming `op` and both shapes otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");

// --- operators ---
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor& operator+=(Tensor& a, const Tensor& b) { return add_(a, b); }
inline Tensor& operator-=(Tensor& a, const Tensor& b) { return sub_(a, b); }
inline Tensor& operator*=(Tensor& a, const Tensor& b) { return mul_(a, b); }
inline Tensor& operator/=(Tensor& a, const Tensor& b) { return div_(a, b); }

}  // namespace strata
