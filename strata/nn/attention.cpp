// scaled_dot_product_attention: the arguments are checked here, once, then flattened to [B, L, E] for the fused
// kernels of the backends (Note [The attention kernel contract] in ops/attention_kernels.h), or composed from the
// tensor ops (the reference that the tests compare the kernels with).

#include <cmath>
#include <limits>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/ops/attention_kernels.h"
#include "strata/tensor/autocast.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"
#include "strata/tensor/random.h"

namespace strata::nn::functional {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

const ops::KernelSlot<ops::AttentionForwardFn> forward_slot("scaled_dot_product_attention");
const ops::KernelSlot<ops::AttentionBackwardFn> backward_slot("scaled_dot_product_attention_backward");

Shape batch_of(const Tensor& t) {
  Shape s;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) s.push_back(t.size(d));
  return s;
}

Shape with_last(Shape s, int64_t a, int64_t b) {
  s.push_back(a);
  s.push_back(b);
  return s;
}

// The composed formula, PyTorch's math path: its autograd comes from the ops it is made of.
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p, bool is_causal,
                double scale) {
  const TensorOptions like = TensorOptions(q.dtype()).device(q.device());
  Tensor scores = mul(matmul(q, k.transpose(-2, -1)), scalar_tensor(scale, like));
  const int64_t L = q.size(-2), S = k.size(-2);
  Tensor allowed;  // boolean: where the key takes part
  if (is_causal) {
    const Tensor i = arange(0, L, 1, TensorOptions(DType::I64).device(q.device())).reshape({L, 1});
    const Tensor j = arange(0, S, 1, TensorOptions(DType::I64).device(q.device())).reshape({1, S});
    allowed = le(j, i);
  } else if (mask.defined() && mask.dtype() == DType::Bool) {
    allowed = mask;
  }
  const Tensor minus_inf = scalar_tensor(-std::numeric_limits<double>::infinity(), like);
  if (allowed.defined()) {
    scores = where(allowed, scores, minus_inf);
  } else if (mask.defined()) {
    scores = add(scores, mask.to(q.dtype()));
  }
  Tensor weights = softmax(scores, -1);
  if (allowed.defined() || mask.defined()) {
    // A row that no key may attend to gives zeros, not softmax's NaN (PyTorch's math path does the same).
    const Tensor empty_row = eq(max(scores.detach(), {-1}, /*keepdim=*/true), minus_inf);
    weights = where(empty_row, scalar_tensor(0.0, like), weights);
  }
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, /*training=*/true);
  return matmul(weights, v);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale_arg, AttentionImpl impl) {
  if (auto cast = amp::detail::low_precision_operands({&query, &key, &value, &attn_mask})) {
    return scaled_dot_product_attention((*cast)[0], (*cast)[1], (*cast)[2], (*cast)[3], dropout_p, is_causal,
                                        scale_arg, impl);
  }
  STRATA_CHECK(query.defined() && key.defined() && value.defined(), InvalidArgumentError,
               "{}: query, key and value must be defined tensors", kOp);
  STRATA_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2, ShapeError,
               "{}: expected query, key and value to be at least 2-D ([..., L, E], [..., S, E], [..., S, Ev]), got "
               "shapes {}, {} and {}",
               kOp, query.shape(), key.shape(), value.shape());
  STRATA_CHECK(query.dtype() == key.dtype() && query.dtype() == value.dtype(), DTypeError,
               "{}: expected query, key and value to have the same dtype, got {}, {} and {}", kOp, query.dtype(),
               key.dtype(), value.dtype());
  STRATA_CHECK(is_floating(query.dtype()), DTypeError, "{}: expected floating tensors, got {}", kOp, query.dtype());
  const Device device = query.device();
  STRATA_CHECK(key.device() == device && value.device() == device, DeviceMismatchError,
               "{}: query, key and value are on {}, {} and {}; move them to one device", kOp, device, key.device(),
               value.device());
  const int64_t L = query.size(-2), E = query.size(-1), S = key.size(-2), Ev = value.size(-1);
  STRATA_CHECK(key.size(-1) == E, ShapeError,
               "{}: the query's last dim (E = {}, shape {}) must equal the key's (shape {})", kOp, E, query.shape(),
               key.shape());
  STRATA_CHECK(value.size(-2) == S, ShapeError,
               "{}: key and value must have the same number of positions S (dim -2), got shapes {} and {}", kOp,
               key.shape(), value.shape());
  STRATA_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, InvalidArgumentError, "{}: dropout_p must be in [0, 1], got {}",
               kOp, dropout_p);
  STRATA_CHECK(!(is_causal && attn_mask.defined()), InvalidArgumentError,
               "{}: pass attn_mask or is_causal=true, not both (as PyTorch)", kOp);
  const Shape batch = broadcast_shapes(broadcast_shapes(batch_of(query), batch_of(key), kOp), batch_of(value), kOp);
  const Shape scores_shape = with_last(batch, L, S);
  if (attn_mask.defined()) {
    STRATA_CHECK(
        attn_mask.dtype() == DType::Bool || attn_mask.dtype() == DType::F32 || attn_mask.dtype() == query.dtype(),
        DTypeError, "{}: attn_mask must be bool, f32 or the query's dtype ({}), got {}", kOp, query.dtype(),
        attn_mask.dtype());
    STRATA_CHECK(attn_mask.device() == device, DeviceMismatchError, "{}: attn_mask is on {}, the query on {}", kOp,
                 attn_mask.device(), device);
    bool fits = attn_mask.dim() <= scores_shape.ssize();
    for (int64_t d = 1; fits && d <= attn_mask.dim(); ++d) {
      const int64_t m = attn_mask.size(-d), s = scores_shape[scores_shape.ssize() - d];
      fits = m == s || m == 1;
    }
    STRATA_CHECK(fits, ShapeError, "{}: attn_mask of shape {} does not broadcast to the scores' shape {}", kOp,
                 attn_mask.shape(), scores_shape);
  }
  const double scale = scale_arg.value_or(1.0 / std::sqrt(static_cast<double>(E)));
  const bool mask_needs_grad = attn_mask.defined() && attn_mask.dtype() != DType::Bool && attn_mask.requires_grad();
  if (impl == AttentionImpl::kComposed || mask_needs_grad || E == 0) {
    return composed(query, key, value, attn_mask, dropout_p, is_causal, scale);
  }

  const Shape out_shape = with_last(batch, L, Ev);
  int64_t B = 1;
  for (int64_t s : batch) B *= s;
  if (B == 0 || L == 0 || Ev == 0 || S == 0) {
    // No scores (S = 0: softmax over nothing, PyTorch's zeros) or no output: zeros, with zero gradients.
    const Tensor none = mul(matmul(query, key.transpose(-2, -1)),
                            scalar_tensor(0.0, TensorOptions(query.dtype()).device(query.device())));
    return matmul(none, value);
  }
  STRATA_CHECK(batch.ssize() <= ops::kAttentionMaxBatchDims, NotImplementedError,
               "{}: at most {} batch dims are supported, got {} (shape {}); reshape them into fewer", kOp,
               ops::kAttentionMaxBatchDims, batch.ssize(), scores_shape);

  // f16 and bf16 are computed in f32, as the CPU's GEMM does; the conversions are ops, so autograd goes through them.
  const DType dtype = query.dtype() == DType::F64 ? DType::F64 : DType::F32;
  const auto flat = [&](const Tensor& t, int64_t rows, int64_t cols) {
    return t.expand(with_last(batch, rows, cols)).to(dtype).contiguous().reshape({B, rows, cols});
  };
  const Tensor q = flat(query, L, E), k = flat(key, S, E), v = flat(value, S, Ev);

  ops::AttentionParams params;
  params.batch = B;
  params.L = L;
  params.S = S;
  params.E = E;
  params.Ev = Ev;
  params.scale = scale;
  params.causal = is_causal;
  Tensor mask;
  if (attn_mask.defined()) {
    mask = attn_mask.dtype() == DType::Bool ? attn_mask : attn_mask.to(dtype).detach();
    mask = mask.expand(scores_shape);  // stride 0 where it broadcasts
    params.mask_kind = mask.dtype() == DType::Bool ? ops::AttentionMask::kBool : ops::AttentionMask::kAdditive;
    params.mask_batch_dims = static_cast<int>(batch.ssize());
    for (int64_t d = 0; d < batch.ssize(); ++d) {
      params.mask_batch_sizes[d] = batch[d];
      params.mask_batch_strides[d] = mask.stride(d);
    }
    params.mask_row_stride = mask.stride(-2);
    params.mask_col_stride = mask.stride(-1);
  }
  params.dropout_p = dropout_p;
  if (dropout_p > 0.0) {
    // The blocks that rand() would draw for the [B, L, S] probabilities (Note [The attention kernel contract]).
    const auto values = static_cast<std::uint64_t>(B) * static_cast<std::uint64_t>(L) * static_cast<std::uint64_t>(S);
    const GeneratorState state = default_generator(device).reserve((values + 3) / 4);
    params.seed = state.seed;
    params.offset = state.offset;
  }

  const TensorOptions options = TensorOptions(dtype).device(device);
  Tensor out = empty({B, L, Ev}, options);
  Tensor lse = empty({B, L}, options);
  const TensorView mask_view = mask.defined() ? mask.view() : TensorView{};
  forward_slot.get(device)(detail::op_call(kOp, device), out.view(), lse.view(), q.view(), k.view(), v.view(),
                           mask_view, params);
  if (detail::needs_grad({&q, &k, &v})) {
    detail::record(
        kOp, {&q, &k, &v}, out,
        [q = q.detach(), k = k.detach(), v = v.detach(), out = out.detach(), lse, mask, params](const Tensor& g) {
          const Tensor go = g.to(q.dtype()).contiguous();
          const TensorOptions o = TensorOptions(q.dtype()).device(q.device());
          Tensor gq = empty(q.shape(), o), gk = empty(k.shape(), o), gv = empty(v.shape(), o);
          const TensorView mv = mask.defined() ? mask.view() : TensorView{};
          backward_slot.get(q.device())(detail::op_call("scaled_dot_product_attention_backward", q.device()), gq.view(),
                                        gk.view(), gv.view(), go.view(), q.view(), k.view(), v.view(), out.view(),
                                        lse.view(), mv, params);
          return std::vector<Tensor>{gq, gk, gv};
        },
        detail::Saves::kInputsAndOutput);
  }
  return out.reshape(out_shape).to(query.dtype());
}

}  // namespace strata::nn::functional
