#pragma once

#include <cstdint>

#include "strata/ops/kernel_table.h"

namespace strata::ops {

// Note [The DNN kernel contract]
// Convolution and pooling reach the backends as the entries below; nn/conv.cpp and nn/pool.cpp validate every
// argument first (ranks, channels, groups, window sizes, dtypes, devices) and compute the output shapes, so a
// backend only computes. What a backend may rely on:
//  - Every view is contiguous NCHW (activations) or OIHW (weights: [O, C/groups, kH, kW]) on the call's device;
//    floating operands share one dtype (f32 or f64; f16/bf16 where the backend says so), pooling indices are i64.
//  - Output sizes follow PyTorch (floor mode): out = (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1 >= 1,
//    every window overlaps the input, and max pooling has pad <= k / 2 (so no window is all padding).
//  - Outputs come first and are written entirely, never read (they may be uninitialised). An optional operand
//    that is absent (no bias, no bias gradient wanted) is a view with data == nullptr.
//  - N, C and O are >= 1 here: the tensors layer answers empty batches itself.
//  - max_pool2d's indices hold, for each output, the flat position h * W + w of the chosen input in its plane
//    (PyTorch's convention), which the backward pass reads instead of searching again.
//  - `allow_tf32` passes set_allow_tf32 down (see Note [One batched GEMM]); `relu` fuses max(0, x) after the bias.
//  - The `_blocked` entries, which only backends with such a layout register, take activations in a channel-blocked
//    layout instead of NCHW (Note [Activations in oneDNN's blocked layout] in nn/blocked.cpp): a contiguous 5-D
//    view [N, C/b, H, W, b], where src_block / dst_block say which of the convolution's activations are blocked
//    and with which b (0: NCHW). Pooling's blocked entries take [N, C/b, H, W, b] and give the same, or NCHW for
//    a run's last pooling; their indices are [N, C/b, H', W', b] either way, b being the input's last size.

/// Window geometry of a 2-D convolution.
struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1, groups = 1;
  bool relu = false;
  bool allow_tf32 = false;
  int64_t src_block = 0, dst_block = 0;  // the `_blocked` entries only (above)
};

/// Window geometry of a 2-D pooling (dilation 1).
struct Pool2dParams {
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

/// out[N, O, H', W'] = conv(input[N, C, H, W], weight[O, C/groups, kH, kW]) + bias[O] (then relu if asked).
using Conv2dFn = void(const OpCall&, const TensorView& out, const TensorView& input, const TensorView& weight,
                      const TensorView& bias, const Conv2dParams&);
/// The gradients of conv2d from grad_output[N, O, H', W']: grad_input[N, C, H, W] (from weight), grad_weight and
/// grad_bias[O] (from input). Each is computed only when its data is set, grad_bias only together with grad_weight.
/// One entry for all three so that a backend can share their work (the CPU reorders grad_output for oneDNN once).
using Conv2dBackwardFn = void(const OpCall&, const TensorView& grad_input, const TensorView& grad_weight,
                              const TensorView& grad_bias, const TensorView& grad_output, const TensorView& input,
                              const TensorView& weight, const Conv2dParams&);

/// out[N, C, H', W'] and indices (i64, same shape) of each window's maximum; padding counts as -infinity.
using MaxPool2dFn = void(const OpCall&, const TensorView& out, const TensorView& indices, const TensorView& input,
                         const Pool2dParams&);
/// grad_input[N, C, H, W]: each grad_output element added at its saved index.
using MaxPool2dBackwardFn = void(const OpCall&, const TensorView& grad_input, const TensorView& grad_output,
                                 const TensorView& indices, const Pool2dParams&);
/// The channel block b that a backend's blocked convolutions take (the `_blocked` entries above), for f32.
using ConvBlockFn = int64_t(const OpCall&);

/// Window means with padding counted as zeros in the divisor kH * kW.
using AvgPool2dFn = void(const OpCall&, const TensorView& out, const TensorView& input, const Pool2dParams&);
using AvgPool2dBackwardFn = void(const OpCall&, const TensorView& grad_input, const TensorView& grad_output,
                                 const Pool2dParams&);
/// Means over PyTorch's adaptive windows [floor(i * H / H'), ceil((i + 1) * H / H')); sizes come from the views.
using AdaptiveAvgPool2dFn = void(const OpCall&, const TensorView& out, const TensorView& input);
using AdaptiveAvgPool2dBackwardFn = void(const OpCall&, const TensorView& grad_input, const TensorView& grad_output);

/// Output length of a window sliding over `in` (floor mode); may be < 1 for windows that do not fit.
inline int64_t window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation = 1) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

}  // namespace strata::ops
