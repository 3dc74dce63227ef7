#pragma once

// The operations of the tensors layer, as free functions and C++ operators. Each validates its arguments once
// in ops/ (devices, shapes, dtypes) and runs the implementation registered for the device type.

#include <optional>
#include <string_view>
#include <tuple>
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
/// GELU by PyTorch's name for its form: approximate "none" (exact, erf) or "tanh".
Tensor gelu(const Tensor& a, std::string_view approximate);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor erf(const Tensor& a);
/// `a` with `value` where the bool `mask` (broadcast with a) is true; a 0-dim tensor value may require grad.
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value);
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Tensor& value);
/// The upper (triu) or lower (tril) triangle of the last two dims, the rest zero: element (i, j) is kept when
/// j - i >= diagonal (triu) or j - i <= diagonal (tril).
Tensor triu(const Tensor& a, int64_t diagonal = 0);
Tensor tril(const Tensor& a, int64_t diagonal = 0);
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
/// The mask must broadcast to self's shape.
Tensor& masked_fill_(Tensor& self, const Tensor& mask, const Scalar& value);
Tensor& masked_fill_(Tensor& self, const Tensor& mask, const Tensor& value);
Tensor& triu_(Tensor& self, int64_t diagonal = 0);
Tensor& tril_(Tensor& self, int64_t diagonal = 0);
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
/// The k largest (smallest unless `largest`) elements along dim and their indices, best first (`sorted` is accepted
/// for PyTorch's signature; the values always come sorted). NaN counts as the largest value.
std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

// --- sampling (tensor/random.cpp) ---
class Generator;
/// num_samples category indices (i64) drawn from each row of non-negative weights (1-D: one row; 2-D: a row
/// each), with or without replacement, from `generator` (the weights' device's default generator when null).
Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement = false,
                   Generator* generator = nullptr);

// --- joining (tensor/views.cpp) ---
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

// --- splitting into views (tensor/views.cpp); gradients flow back through each part ---
/// Parts of split_size along dim (the last one smaller when the size does not divide).
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
/// Parts of the given sizes along dim, which must add up to its size.
std::vector<Tensor> split_with_sizes(const Tensor& a, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
/// At most `chunks` parts of ceil(size / chunks) along dim, as PyTorch's chunk.
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);
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
