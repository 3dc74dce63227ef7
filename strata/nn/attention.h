#pragma once

// scaled_dot_product_attention (PyTorch's torch.nn.functional.scaled_dot_product_attention), fused on every
// device, and the composed formula it is tested against. Included by nn/functional.h.

#include <optional>

#include "strata/tensor/tensor.h"

namespace strata::nn::functional {

/// Which implementation scaled_dot_product_attention runs.
enum class AttentionImpl {
  kFused,     // one kernel per pass that never holds more than a block of the L x S scores (the default)
  kComposed,  // matmul, mask, softmax, dropout and matmul from the tensor ops: the reference of the tests
};

/// softmax(q k^T * scale + mask) v over the last two dims, with dropout on the probabilities when dropout_p > 0.
/// query [..., L, E], key [..., S, E], value [..., S, Ev] -> [..., L, Ev]; the batch dims (...) broadcast.
/// attn_mask, broadcastable to [..., L, S], is boolean (true: the key takes part) or additive (f32 or query's
/// dtype); is_causal masks key j from query i when j > i, and refuses a mask as PyTorch does. scale defaults to
/// 1 / sqrt(E). A query row that every key is masked from gives zeros. Dropout draws from the device's default
/// generator. A float attn_mask that requires grad is differentiated through the composed path.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    AttentionImpl impl = AttentionImpl::kFused);

}  // namespace strata::nn::functional
