#pragma once

// The backend entries of layer_norm (nn/normalization.cpp checks the arguments; backends compute).

#include "strata/ops/kernel_table.h"

namespace strata::ops {

// Note [The layer_norm kernel contract]
// nn/normalization.cpp validates the arguments and flattens them, so a backend only computes:
//  - x, y, grad_y and grad_x are contiguous [rows, n] views of one floating dtype T (f16, bf16, f32 or f64), with
//    rows >= 1 and n >= 1 (the normalized dims flattened into n). weight and bias, when given, are contiguous [n]
//    of T; an absent one is a view whose data is null (weight 1, bias 0).
//  - mean and rstd are contiguous [rows] in the compute type: f64 for f64, f32 otherwise (f16 and bf16 compute in
//    f32). The forward entry writes each row's mean and 1 / sqrt(biased variance + eps), the variance taken around
//    the mean in a second pass (no cancellation between sums of x and of x^2), and
//    y = (x - mean) * rstd * weight + bias. The backward entry reads them back instead of recomputing them.
//  - The backward entry writes, from grad_y, each output whose data is not null: grad_x [rows, n],
//    grad_weight and grad_bias [n] (sums over the rows of grad_y * xhat and of grad_y, xhat = (x - mean) * rstd).
//    Those sums are split into chunks of rows that depend only on rows, n and the device type, and the chunks'
//    partial sums are added in order, so the result does not depend on the number of threads.
using LayerNormForwardFn = void(const OpCall&, const TensorView& y, const TensorView& mean, const TensorView& rstd,
                                const TensorView& x, const TensorView& weight, const TensorView& bias, double eps);
using LayerNormBackwardFn = void(const OpCall&, const TensorView& grad_x, const TensorView& grad_weight,
                                 const TensorView& grad_bias, const TensorView& grad_y, const TensorView& x,
                                 const TensorView& mean, const TensorView& rstd, const TensorView& weight);

}  // namespace strata::ops
