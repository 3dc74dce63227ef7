#pragma once

// The backend entries of scaled_dot_product_attention (nn/attention.cpp checks the arguments; backends compute).

#include <cstdint>

#include "strata/core/macros.h"
#include "strata/ops/kernel_table.h"

namespace strata::ops {

// Note [The attention kernel contract]
// nn/attention.cpp validates and flattens the arguments, so a backend only computes:
//  - q [B, L, E], k [B, S, E], v [B, S, Ev] and out [B, L, Ev] are contiguous views of one floating dtype (f32 or
//    f64: the front end computes f16/bf16 in f32), B, L, S, E, Ev >= 1. lse [B, L] is in the same dtype: each
//    row's log-sum-exp of its scaled, masked scores (-inf for a row that every key is masked from, whose output
//    is 0), which the backward pass reads to recompute the probabilities block by block.
//  - The mask, when mask_kind is not kNone, is a view whose element (b, i, j) lies at
//    mask_offset(b) + i * mask_row_stride + j * mask_col_stride elements from its data, where mask_offset unravels
//    b over the (broadcast) batch sizes with the mask's batch strides (0 where it broadcasts). A boolean mask
//    (bool bytes) keeps the scores where true; an additive one, in q's dtype, is added to the scaled scores.
//  - `causal` masks j > i (top left aligned, PyTorch's tril(ones(L, S))); it never comes with a mask.
//  - With dropout_p > 0, a probability (b, i, j) is kept, and scaled by 1 / (1 - dropout_p), when the f32 uniform
//    of element n = (b * L + i) * S + j of the Philox stream (seed, offset) is >= dropout_p: word n % 4 of block
//    offset + n / 4, the numbers rand() draws for a [B, L, S] tensor, so that dropout() on the composed path
//    drops the same elements from the same generator state. The backward pass regenerates the same mask.
//  - Outputs come first and are written entirely. The backward entry writes grad_q, grad_k and grad_v (shaped as
//    q, k and v) from grad_out [B, L, Ev], reading q, k, v, out and lse of the forward pass.

inline constexpr int kAttentionMaxBatchDims = 8;

enum class AttentionMask : int { kNone = 0, kBool = 1, kAdditive = 2 };

struct AttentionParams {
  int64_t batch = 0, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1.0;
  bool causal = false;
  AttentionMask mask_kind = AttentionMask::kNone;
  int mask_batch_dims = 0;
  int64_t mask_batch_sizes[kAttentionMaxBatchDims] = {};
  int64_t mask_batch_strides[kAttentionMaxBatchDims] = {};
  int64_t mask_row_stride = 0, mask_col_stride = 0;
  double dropout_p = 0.0;
  std::uint64_t seed = 0, offset = 0;

  /// Elements from the mask's data to its element (b, 0, 0).
  STRATA_HOST_DEVICE int64_t mask_offset(int64_t b) const {
    int64_t off = 0;
    for (int d = mask_batch_dims - 1; d >= 0; --d) {
      off += (b % mask_batch_sizes[d]) * mask_batch_strides[d];
      b /= mask_batch_sizes[d];
    }
    return off;
  }
};

using AttentionForwardFn = void(const OpCall&, const TensorView& out, const TensorView& lse, const TensorView& q,
                                const TensorView& k, const TensorView& v, const TensorView& mask,
                                const AttentionParams&);
using AttentionBackwardFn = void(const OpCall&, const TensorView& grad_q, const TensorView& grad_k,
                                 const TensorView& grad_v, const TensorView& grad_out, const TensorView& q,
                                 const TensorView& k, const TensorView& v, const TensorView& out, const TensorView& lse,
                                 const TensorView& mask, const AttentionParams&);

}  // namespace strata::ops
