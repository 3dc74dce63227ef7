// matmul, mm, bmm, addmm: shapes, dtypes and layouts are settled here, once; every product then runs as the one
// batched GEMM of Note [One batched GEMM] (ops/matmul_kernels.h).

#include <algorithm>
#include <atomic>
#include <optional>

#include "strata/core/error.h"
#include "strata/ops/checks.h"
#include "strata/ops/matmul_kernels.h"
#include "strata/tensor/autocast.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"
#include "strata/tensor/op_checks.h"

namespace strata {

namespace {

const ops::KernelSlot<ops::GemmFn> gemm_slot("gemm");
std::atomic<bool> tf32_allowed{false};

// One operand seen as a stack of matrices: batch dims (as in the tensor) and one matrix's rows/cols with strides.
struct Operand {
  Tensor t;
  Shape batch;
  Strides batch_strides;
  int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 0;
};

// `vector_as`: how a 1-D tensor enters the product ('r' a row [1, k], 'c' a column [k, 1]).
Operand operand_of(const Tensor& t, char vector_as) {
  Operand o{t, {}, {}, 1, 1, 0, 0};
  const int64_t d = t.dim();
  if (d == 1) {
    (vector_as == 'r' ? o.cols : o.rows) = t.size(0);
    (vector_as == 'r' ? o.col_stride : o.row_stride) = t.stride(0);
    return o;
  }
  o.batch.assign(t.shape().begin(), t.shape().end() - 2);
  o.batch_strides.assign(t.strides().begin(), t.strides().end() - 2);
  o.rows = t.size(-2);
  o.cols = t.size(-1);
  o.row_stride = t.stride(-2);
  o.col_stride = t.stride(-1);
  return o;
}

// Puts the matrix strides in the canonical form of Note [One batched GEMM] (row-major preferred); false when
// BLAS cannot read the matrix as it is.
bool canonicalise_layout(Operand& o) {
  const int64_t r = o.rows, c = o.cols;
  if ((o.col_stride == 1 || c == 1) && (r == 1 || o.row_stride >= std::max<int64_t>(1, c))) {
    o.col_stride = 1;
    if (r == 1) o.row_stride = std::max<int64_t>(1, c);
    return true;
  }
  if ((o.row_stride == 1 || r == 1) && (c == 1 || o.col_stride >= std::max<int64_t>(1, r))) {
    o.row_stride = 1;
    if (c == 1) o.col_stride = std::max<int64_t>(1, r);
    return true;
  }
  return false;
}

// The batch dims of `o` expanded to `batch` and collapsed into one dim: its stride (0 for a broadcast operand),
// or nothing when the dims do not collapse (e.g. broadcast in one dim but not in the next).
std::optional<int64_t> collapsed_batch_stride(const Operand& o, const Shape& batch) {
  const auto lead = batch.ssize() - o.batch.ssize();
  std::optional<int64_t> step;  // the innermost non-trivial dim's stride: element j of the collapsed dim is at j*step
  int64_t inner_stride = 0, inner_size = 1;
  for (auto i = batch.ssize() - 1; i >= 0; --i) {
    if (batch[i] == 1) continue;
    const int64_t own = i - lead;
    const int64_t stride = own >= 0 && o.batch[own] != 1 ? o.batch_strides[own] : 0;
    if (!step) {
      step = stride;
    } else if (stride != inner_stride * inner_size) {
      return std::nullopt;
    }
    inner_stride = stride;
    inner_size = batch[i];
  }
  return step.value_or(0);
}

// The [batch, rows, cols] view the GEMM kernel reads. Copies the operand (expanded to `batch`) when its batch
// dims do not collapse into one.
TensorView gemm_view(Operand& o, const Shape& batch, int64_t batch_count) {
  std::optional<int64_t> step = collapsed_batch_stride(o, batch);
  if (!step) {
    Shape shape = batch;
    Strides strides(batch.size(), 0);
    const auto lead = batch.ssize() - o.batch.ssize();
    for (int64_t i = 0; i < o.batch.ssize(); ++i) {
      if (o.batch[i] != 1) strides[lead + i] = o.batch_strides[i];
    }
    shape.push_back(o.rows);
    shape.push_back(o.cols);
    strides.push_back(o.row_stride);
    strides.push_back(o.col_stride);
    o.t = Tensor(o.t.storage(), o.t.dtype(), shape, strides, o.t.offset()).contiguous();
    o.row_stride = std::max<int64_t>(1, o.cols);
    o.col_stride = 1;
    canonicalise_layout(o);
    step = o.rows * o.cols;
  }
  TensorView v = o.t.view();
  v.shape = {batch_count, o.rows, o.cols};
  v.strides = {batch_count == 1 ? 0 : *step, o.row_stride, o.col_stride};
  return v;
}

Operand prepared(const char* op, const Tensor& t, char vector_as) {
  Operand o = operand_of(t, vector_as);
  if (!canonicalise_layout(o)) {
    o = operand_of(t.contiguous(), vector_as);
    const bool ok = canonicalise_layout(o);
    STRATA_CHECK(ok, Error, "{}: internal error: a contiguous operand has no BLAS layout", op);
  }
  return o;
}

void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  STRATA_CHECK(a.defined() && b.defined(), InvalidArgumentError, "{}: an argument is an undefined tensor", op);
  const TensorView av = a.view(), bv = b.view();
  ops::check_same_device(op, {&av, &bv});
  STRATA_CHECK(a.dtype() == b.dtype(), DTypeError,
               "{}: both arguments must have the same dtype, got {} and {} (convert one with .to(dtype))", op,
               a.dtype(), b.dtype());
  STRATA_CHECK(is_floating(a.dtype()), DTypeError,
               "{}: {} tensors are not supported; matrix products take f32, f64, f16 or bf16 (convert with "
               ".to(DType::F32))",
               op, a.dtype());
}

// a @ b with numpy's rules, into a new tensor; with `bias`, beta * bias + alpha * a @ b (bias broadcast to the
// result, which must then have a's and b's product shape).
Tensor product(const char* op, const Tensor& a, const Tensor& b, double alpha, double beta, const Tensor* bias) {
  STRATA_CHECK(a.dim() >= 1 && b.dim() >= 1, ShapeError,
               "{}: both arguments need at least one dimension, got shapes {} and {}", op, a.shape(), b.shape());
  Operand oa = prepared(op, a, 'r');
  Operand ob = prepared(op, b, 'c');
  STRATA_CHECK(oa.cols == ob.rows, ShapeError, "{}: shapes {} and {} cannot be multiplied ({} != {})", op, a.shape(),
               b.shape(), oa.cols, ob.rows);

  // Batch dims broadcast as in numpy.
  Shape batch(std::max(oa.batch.size(), ob.batch.size()), 1);
  for (int64_t i = 1; i <= batch.ssize(); ++i) {
    const int64_t da = i <= oa.batch.ssize() ? oa.batch[oa.batch.size() - i] : 1;
    const int64_t db = i <= ob.batch.ssize() ? ob.batch[ob.batch.size() - i] : 1;
    STRATA_CHECK(da == db || da == 1 || db == 1, ShapeError,
                 "{}: the batch dimensions of shapes {} and {} do not broadcast", op, a.shape(), b.shape());
    batch[batch.size() - i] = da == 1 ? db : da;
  }
  Shape out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(oa.rows);
  if (b.dim() > 1) out_shape.push_back(ob.cols);

  Tensor out = empty(out_shape, TensorOptions(a.dtype()).device(a.device()));
  if (bias != nullptr && beta != 0.0) detail::copy_values(out, *bias);
  if (out.numel() == 0) return out;
  if (oa.cols == 0) {
    // A sum of nothing: beta * bias, or zeros (backends only see k >= 1, see Note [One batched GEMM]).
    return bias != nullptr && beta != 0.0 ? out * beta : out.fill_(0);
  }

  int64_t batch_count = numel(batch);
  int64_t m = oa.rows;
  // A stack of row-major matrices times one matrix is one tall matrix times it: a single, larger GEMM.
  const std::optional<int64_t> b_step = collapsed_batch_stride(ob, batch);
  const std::optional<int64_t> a_step = collapsed_batch_stride(oa, batch);
  if (batch_count > 1 && b_step == 0 && a_step == m * oa.row_stride && oa.col_stride == 1) {
    m *= batch_count;
    oa.rows = m;
    oa.batch = {};
    oa.batch_strides = {};
    batch = {};
    batch_count = 1;
  }
  const TensorView av = gemm_view(oa, batch, batch_count);
  const TensorView bv = gemm_view(ob, batch, batch_count);
  TensorView ov = out.view();
  ov.shape = {batch_count, m, ob.cols};
  ov.strides = {m * ob.cols, ob.cols, 1};
  gemm_slot.get(a.device())(detail::op_call(op, a.device()), ov, av, bv, alpha, bias != nullptr ? beta : 0.0,
                            allow_tf32());
  return out;
}

// Note [Gradient of matmul]
// With 1-D operands promoted to matrices (a: [k] -> [1, k], b: [k] -> [k, 1]) and the gradient reshaped to match,
// da = g @ b^T and db = a^T @ g; batch dimensions that were broadcast are summed back (detail::sum_to).
std::vector<Tensor> matmul_grads(const Tensor& g, const Tensor& a, const Tensor& b, bool ra, bool rb) {
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  Tensor g2 = g;
  if (b.dim() == 1) g2 = g2.unsqueeze(g2.dim());
  if (a.dim() == 1) g2 = g2.unsqueeze(g2.dim() - 1);
  // Rows of any batch times one matrix (linear on [B, T, C]): the batch dims are more rows of one product, so b's
  // gradient is one GEMM over all the rows, instead of a product per batch entry summed afterwards (which also held
  // B copies of b's gradient at once).
  if (b2.dim() == 2 && a2.dim() > 2) {
    std::vector<Tensor> grads =
        matmul_grads(g2.reshape({-1, g2.size(-1)}), a2.reshape({-1, a2.size(-1)}), b2, ra, rb);
    if (ra) grads[0] = grads[0].reshape(a.shape());
    if (rb) grads[1] = grads[1].reshape(b.shape());
    return grads;
  }
  Tensor ga, gb;
  // A matrix operand stored transposed (linear's weight.t()) gets its gradient stored the same way, computed as
  // the transposed product: its gradient then flows back through the transpose as a contiguous tensor, instead of
  // being copied element by element from a transposed view.
  const auto stored_transposed = [&g2](const Tensor& m) {
    return m.dim() == 2 && g2.dim() == 2 && m.size(0) > 1 && m.size(1) > 1 && m.stride(0) == 1 &&
           m.stride(1) == m.size(0);
  };
  if (ra) {
    ga = stored_transposed(a2) ? matmul(b2, g2.t()).t()
                               : detail::sum_to(matmul(g2, b2.transpose(-1, -2)), a2.shape());
    ga = ga.reshape(a.shape());
  }
  if (rb) {
    gb = stored_transposed(b2) ? matmul(g2.t(), a2).t()
                               : detail::sum_to(matmul(a2.transpose(-1, -2), g2), b2.shape());
    gb = gb.reshape(b.shape());
  }
  return {ga, gb};
}

/// Records a product a @ b (matmul, mm, bmm).
Tensor& record_product(const char* op, const Tensor& a, const Tensor& b, Tensor& out) {
  if (detail::needs_grad({&a, &b})) {
    const bool ra = a.requires_grad(), rb = b.requires_grad();
    detail::record(op, {&a, &b}, out, [a, b, ra, rb](const Tensor& g) { return matmul_grads(g, a, b, ra, rb); });
  }
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (auto cast = amp::detail::low_precision_operands({&a, &b})) return matmul((*cast)[0], (*cast)[1]);
  check_operands("matmul", a, b);
  Tensor out = product("matmul", a, b, 1.0, 0.0, nullptr);
  return record_product("matmul", a, b, out);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  if (auto cast = amp::detail::low_precision_operands({&a, &b})) return mm((*cast)[0], (*cast)[1]);
  check_operands("mm", a, b);
  STRATA_CHECK(a.dim() == 2 && b.dim() == 2, ShapeError, "mm: both arguments must be 2-D, got shapes {} and {}",
               a.shape(), b.shape());
  Tensor out = product("mm", a, b, 1.0, 0.0, nullptr);
  return record_product("mm", a, b, out);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (auto cast = amp::detail::low_precision_operands({&a, &b})) return bmm((*cast)[0], (*cast)[1]);
  check_operands("bmm", a, b);
  STRATA_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0), ShapeError,
               "bmm: both arguments must be 3-D with the same batch size, got shapes {} and {}", a.shape(), b.shape());
  Tensor out = product("bmm", a, b, 1.0, 0.0, nullptr);
  return record_product("bmm", a, b, out);
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  if (auto cast = amp::detail::low_precision_operands({&bias, &a, &b})) {
    return addmm((*cast)[0], (*cast)[1], (*cast)[2], beta, alpha);
  }
  constexpr const char* op = "addmm";
  check_operands(op, a, b);
  STRATA_CHECK(bias.defined(), InvalidArgumentError, "{}: the bias is an undefined tensor", op);
  const TensorView biasv = bias.view(), av = a.view();
  ops::check_same_device(op, {&biasv, &av});
  STRATA_CHECK(bias.dtype() == a.dtype(), DTypeError, "{}: the bias has dtype {} but the matrices have {}", op,
               bias.dtype(), a.dtype());
  STRATA_CHECK(a.dim() == 2 && b.dim() == 2, ShapeError, "{}: both matrices must be 2-D, got shapes {} and {}", op,
               a.shape(), b.shape());
  const Shape result{a.size(0), b.size(1)};
  bool fits = bias.dim() <= 2;
  for (int64_t i = 1; fits && i <= bias.dim(); ++i) {
    const int64_t s = bias.size(-i);
    fits = s == 1 || s == result[result.size() - i];
  }
  STRATA_CHECK(fits, ShapeError, "{}: the bias of shape {} does not broadcast to the product's shape {} ({} @ {})", op,
               bias.shape(), result, a.shape(), b.shape());
  Tensor out = product(op, a, b, alpha.to_double(), beta.to_double(), &bias);
  if (detail::needs_grad({&bias, &a, &b})) {
    const double al = alpha.to_double(), be = beta.to_double();
    const bool ra = a.requires_grad(), rb = b.requires_grad(), rbias = bias.requires_grad();
    detail::record(op, {&bias, &a, &b}, out, [bias, a, b, al, be, ra, rb, rbias](const Tensor& g) {
      const auto scaled = [&g](double s) { return s == 1.0 ? g : g * s; };  // linear's addmm has both 1
      std::vector<Tensor> ab = matmul_grads(scaled(al), a, b, ra, rb);
      return std::vector<Tensor>{rbias ? detail::sum_to(scaled(be), bias.shape()) : Tensor(), ab[0], ab[1]};
    });
  }
  return out;
}

void set_allow_tf32(bool allow) { tf32_allowed.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return tf32_allowed.load(std::memory_order_relaxed); }

}  // namespace strata
