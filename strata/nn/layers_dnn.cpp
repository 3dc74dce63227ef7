// The layers over the DNN primitives of nn/functional.h: convolution, pooling, normalisation, dropout, embedding.

#include <cmath>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/nn/blocked.h"
#include "strata/nn/init.h"
#include "strata/nn/layers.h"
#include "strata/tensor/functions.h"

namespace strata::nn {

Conv2d::Conv2d(const Conv2dOptions& options_) : Layer("Conv2d"), options(options_) {
  const auto& o = options;
  STRATA_CHECK(o.in_channels > 0 && o.out_channels > 0 && o.groups_ > 0, InvalidArgumentError,
               "Conv2d: in_channels ({}), out_channels ({}) and groups ({}) must be positive", o.in_channels,
               o.out_channels, o.groups_);
  STRATA_CHECK(o.in_channels % o.groups_ == 0 && o.out_channels % o.groups_ == 0, InvalidArgumentError,
               "Conv2d: in_channels ({}) and out_channels ({}) must be divisible by groups ({})", o.in_channels,
               o.out_channels, o.groups_);
  STRATA_CHECK(o.kernel_size.h > 0 && o.kernel_size.w > 0, InvalidArgumentError,
               "Conv2d: kernel size must be positive, got {}x{}", o.kernel_size.h, o.kernel_size.w);
  weight = register_parameter(
      "weight", empty({o.out_channels, o.in_channels / o.groups_, o.kernel_size.h, o.kernel_size.w},
                      o.tensor_options_));
  if (o.bias_) bias = register_parameter("bias", empty({o.out_channels}, o.tensor_options_));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::calculate_fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2d::forward(const Tensor& input) {
  return functional::conv2d(input, weight, bias, options.stride_, options.padding_, options.dilation_,
                            options.groups_);
}

Tensor Conv2d::call_with_relu(const Tensor& input) {
  check_device(input);
  return functional::conv2d_relu(input, weight, bias, options.stride_, options.padding_, options.dilation_,
                                 options.groups_);
}

Tensor Conv2d::call_blocked(const Tensor& input, int64_t in_block, int64_t block) {
  check_device(input);
  return blocked::conv2d(input, weight, bias, options.stride_, options.padding_, options.dilation_, options.groups_,
                         in_block, block);
}

Tensor MaxPool2d::forward(const Tensor& input) {
  return functional::max_pool2d(input, options.kernel_size, options.stride_, options.padding_);
}

Tensor AvgPool2d::forward(const Tensor& input) {
  return functional::avg_pool2d(input, options.kernel_size, options.stride_, options.padding_);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& input) { return functional::adaptive_avg_pool2d(input, output_size); }

BatchNorm2d::BatchNorm2d(const BatchNorm2dOptions& options_) : Layer("BatchNorm2d"), options(options_) {
  const auto& o = options;
  STRATA_CHECK(o.num_features > 0, InvalidArgumentError, "BatchNorm2d: num_features must be positive, got {}",
               o.num_features);
  if (o.affine_) {
    weight = register_parameter("weight", ones({o.num_features}, o.tensor_options_));
    bias = register_parameter("bias", zeros({o.num_features}, o.tensor_options_));
  }
  if (o.track_running_stats_) {
    running_mean = register_buffer("running_mean", zeros({o.num_features}, o.tensor_options_));
    running_var = register_buffer("running_var", ones({o.num_features}, o.tensor_options_));
    num_batches_tracked = register_buffer(
        "num_batches_tracked", zeros({}, TensorOptions(DType::I64).device(o.tensor_options_.device_)));
  }
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  STRATA_CHECK(input.dim() == 4, ShapeError, "{}: expects NCHW input (4-D), got {}", describe(), input.shape());
  STRATA_CHECK(input.size(1) == options.num_features, ShapeError, "{}: expects {} channels, got input {}",
               describe(), options.num_features, input.shape());
  // Without running statistics, the batch statistics are used in eval mode too (as PyTorch).
  const bool use_batch_stats = is_training() || !options.track_running_stats_;
  if (is_training() && options.track_running_stats_) {
    NoGradGuard no_grad;
    add_(num_batches_tracked, ones({}, TensorOptions(DType::I64).device(num_batches_tracked.device())));
  }
  return functional::batch_norm(input, running_mean, running_var, weight, bias, use_batch_stats, options.momentum_,
                                options.eps_);
}

LayerNorm::LayerNorm(const LayerNormOptions& options_) : Layer("LayerNorm"), options(options_) {
  if (options.elementwise_affine_) {
    weight = register_parameter("weight", ones(options.normalized_shape, options.tensor_options_));
    bias = register_parameter("bias", zeros(options.normalized_shape, options.tensor_options_));
  }
}

Tensor LayerNorm::forward(const Tensor& input) {
  return functional::layer_norm(input, options.normalized_shape, weight, bias, options.eps_);
}

Dropout::Dropout(double p_) : Layer("Dropout"), p(p_) {
  STRATA_CHECK(p >= 0.0 && p <= 1.0, InvalidArgumentError, "Dropout: p must be in [0, 1], got {}", p);
}

Tensor Dropout::forward(const Tensor& input) { return functional::dropout(input, p, is_training()); }

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, TensorOptions tensor_options)
    : Layer("Embedding") {
  STRATA_CHECK(num_embeddings > 0 && embedding_dim > 0, InvalidArgumentError,
               "Embedding: num_embeddings ({}) and embedding_dim ({}) must be positive", num_embeddings,
               embedding_dim);
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}, tensor_options));
  init::normal_(weight);
}

Tensor Embedding::forward(const Tensor& indices) { return functional::embedding(indices, weight); }

}  // namespace strata::nn
