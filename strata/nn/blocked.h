#pragma once

// Activations in a backend's channel-blocked layout, for the runs of layers that a fused Sequential keeps in it
// (Note [Activations in oneDNN's blocked layout] in blocked.cpp). A blocked activation is an ordinary contiguous
// tensor [N, C/b, H, W, b]: the ops that do not care about layout (ReLU, its gradient, adding gradients) take it
// as it is, and these take it in place of NCHW.

#include <cstdint>
#include <optional>

#include "strata/nn/functional.h"
#include "strata/tensor/tensor.h"

namespace strata::nn::blocked {

using functional::Pair;

/// The channel block b of `device`'s blocked convolutions for `dtype`, or 0 where it has none.
int64_t block_size(Device device, DType dtype);

/// The NCHW shape of `t`: its own when `block` is 0, else that of the blocked activation [N, C/block, H, W, block]
/// it is checked to be (ShapeError naming `op` otherwise).
Shape nchw_shape(const char* op, const Tensor& t, int64_t block);

/// conv2d to a blocked output [N, O/block, OH, OW, block] from an NCHW input (`in_block` 0) or a blocked one
/// (`in_block` = block). The caller says which: a 5-D tensor is not taken for a blocked one.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding, Pair dilation,
              int64_t groups, int64_t in_block, int64_t block);
/// max_pool2d of a blocked input [N, C/b, H, W, b] to a blocked output, or to NCHW with `nchw_out` (a run's last).
Tensor max_pool2d(const Tensor& input, Pair kernel, std::optional<Pair> stride, Pair padding, int64_t block,
                  bool nchw_out);

}  // namespace strata::nn::blocked
