#pragma once

// The DNN primitives as functions on tensors (PyTorch's torch.nn.functional). Each records its derivative for
// autograd (Note [Autograd hooks in the tensors layer]); the layers of nn/layers.h are thin modules over these.
// Inputs are NCHW for the 2-D ops. Every argument is checked here with an error that names the op and the value.

#include <cstdint>
#include <optional>

#include "strata/tensor/tensor.h"

namespace strata::nn::functional {

/// Height and width of a 2-D window parameter (kernel size, stride, padding, dilation).
struct Pair {
  int64_t h = 0, w = 0;
  Pair(int64_t both) : h(both), w(both) {}  // NOLINT: Pair p = 3 reads like PyTorch
  Pair(int64_t h_, int64_t w_) : h(h_), w(w_) {}
};

/// How a loss reduces its per-element values.
enum class Reduction { None, Mean, Sum };

/// The target value that the class losses skip by default, PyTorch's.
inline constexpr int64_t kIgnoreIndex = -100;

// --- conv.cpp, pool.cpp ---
/// 2-D convolution: input [N, C, H, W], weight [O, C/groups, kH, kW], optional bias [O] -> [N, O, H', W'].
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, Pair stride = 1, Pair padding = 0,
              Pair dilation = 1, int64_t groups = 1);
/// relu(conv2d(...)) as one fused primitive where the backend offers it (oneDNN post-op, cuDNN fused epilogue).
Tensor conv2d_relu(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, Pair stride = 1,
                   Pair padding = 0, Pair dilation = 1, int64_t groups = 1);
/// Max pooling over kernel windows; stride defaults to the kernel size; padding counts as -infinity.
Tensor max_pool2d(const Tensor& input, Pair kernel, std::optional<Pair> stride = std::nullopt, Pair padding = 0);
/// Average pooling; padding counts as zeros included in the divisor (PyTorch's count_include_pad=true).
Tensor avg_pool2d(const Tensor& input, Pair kernel, std::optional<Pair> stride = std::nullopt, Pair padding = 0);
/// Average pooling to a fixed output size (PyTorch's adaptive window bounds).
Tensor adaptive_avg_pool2d(const Tensor& input, Pair output_size);

// --- linear.cpp, embedding.cpp, dropout.cpp ---
/// input [..., in] @ weight[out, in]^T + bias[out].
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = {});
/// Rows of `weight` [num, dim] picked by the integer `indices` (any shape) -> [..., dim]; an index out of range
/// is a device-side assert naming the index and value.
Tensor embedding(const Tensor& indices, const Tensor& weight);
/// Zeroes each element with probability p and scales the rest by 1/(1-p) when `training`; identity otherwise.
/// Seeded through the device's default generator.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true);

// --- normalization.cpp ---
/// Batch normalisation over N (and H, W) per channel (dim 1). In training, uses the batch statistics and updates
/// running_mean/running_var in place (when defined) with `momentum` (unbiased variance, as PyTorch); in inference
/// uses the running statistics.
/// Every tensor may be undefined, as PyTorch's None: without running statistics, training must be true (PyTorch's
/// default is false, kept here, so inference without them is an error that says so).
Tensor batch_norm(const Tensor& input, const Tensor& running_mean = {}, const Tensor& running_var = {},
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false, double momentum = 0.1,
                  double eps = 1e-5);
/// Normalises over the last `normalized_shape.size()` dims, then applies the optional affine weight and bias.
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

// --- loss.cpp ---
/// Cross-entropy of logits [N, C] (or [N, C, d...]) against class indices [N] (or [N, d...]); a target outside
/// [0, C) other than ignore_index is a device-side assert naming the value. label_smoothing in [0, 1). Targets equal
/// to ignore_index (PyTorch's -100 by default) add nothing to the loss or the gradient, and the mean is over the
/// others (NaN when every target is ignored, as in PyTorch).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction = Reduction::Mean,
                     double label_smoothing = 0.0, int64_t ignore_index = kIgnoreIndex);
/// Negative log-likelihood of log-probabilities [N, C] against class indices [N]; ignore_index as cross_entropy.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::Mean,
                int64_t ignore_index = kIgnoreIndex);
/// Mean squared error between two tensors of the same shape.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

// --- functional_options.cpp: LibTorch's options form, the same ops as above ---
struct Conv2dFuncOptions;
struct MaxPool2dFuncOptions;
struct BatchNormFuncOptions;
struct CrossEntropyFuncOptions;
/// conv2d(input, weight, Conv2dFuncOptions().stride(2).padding(1)).
Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& options);
/// max_pool2d(input, MaxPool2dFuncOptions(2).stride(1)).
Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& options);
/// batch_norm(input, running_mean, running_var, BatchNormFuncOptions().weight(w).bias(b).training(true)).
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& options);
/// cross_entropy(logits, target, CrossEntropyFuncOptions().ignore_index(0).reduction(Reduction::Sum)).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyFuncOptions& options);

}  // namespace strata::nn::functional

#include "strata/nn/attention.h"
#include "strata/nn/functional_options.h"
