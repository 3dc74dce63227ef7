// Linear, the activations, Flatten and Sequential (nn/layers.h). The layers over the DNN primitives of
// nn/functional.h (convolution, pooling, normalisation, dropout, embedding) live in layers_dnn.cpp.

#include "strata/nn/layers.h"

#include <cmath>
#include <string>
#include <typeinfo>

#include "strata/core/error.h"
#include "strata/nn/blocked.h"
#include "strata/nn/init.h"
#include "strata/tensor/functions.h"

namespace strata::nn {

Linear::Linear(const LinearOptions& options_) : Layer("Linear"), options(options_) {
  STRATA_CHECK((options.in_features > 0 || options.in_features == -1) && options.out_features > 0,
               InvalidArgumentError,
               "Linear: in_features ({}) must be positive or -1 (inferred from the first input) and out_features "
               "({}) positive",
               options.in_features, options.out_features);
  const bool lazy = !is_initialized();
  weight = register_parameter("weight", empty({options.out_features, lazy ? 0 : options.in_features},
                                               options.tensor_options_));
  if (options.bias_) bias = register_parameter("bias", empty({options.out_features}, options.tensor_options_));
  if (!lazy) reset_parameters();
}

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, TensorOptions tensor_options)
    : Linear([&] {
        LinearOptions o(in_features, out_features);
        o.bias_ = bias;
        o.tensor_options_ = tensor_options;
        return o;
      }()) {}

void Linear::reset_parameters() {
  if (!is_initialized()) return;  // a lazy layer draws its values at its first forward
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& input) {
  if (!is_initialized()) {
    STRATA_CHECK(input.dim() >= 1 && input.size(-1) > 0, ShapeError,
                 "{}: cannot infer in_features from an input of shape {}", describe(), input.shape());
    // In place, on the weight's current device and dtype (the module may have moved since construction).
    weight.set_data(empty({options.out_features, input.size(-1)},
                          TensorOptions(weight.dtype()).device(weight.device())));
    options.in_features = input.size(-1);
    reset_parameters();
  }
  return functional::linear(input, weight, bias);
}

Tensor ReLU::forward(const Tensor& input) { return relu(input); }
GELU::GELU(std::string approximate) : Layer("GELU"), approximate_(std::move(approximate)) {
  STRATA_CHECK(approximate_ == "none" || approximate_ == "tanh", InvalidArgumentError,
               "GELU: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate_);
}
Tensor GELU::forward(const Tensor& input) { return gelu(input, approximate_); }
Tensor Tanh::forward(const Tensor& input) { return tanh(input); }
Tensor Sigmoid::forward(const Tensor& input) { return sigmoid(input); }
Tensor Flatten::forward(const Tensor& input) { return input.flatten(start_dim_, end_dim_); }

void Sequential::push_back(std::shared_ptr<Layer> layer) {
  STRATA_CHECK(layer != nullptr, InvalidArgumentError, "Sequential::push_back: the layer is null");
  register_module(std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
}

const std::shared_ptr<Layer>& Sequential::operator[](std::size_t i) const {
  STRATA_CHECK(i < layers_.size(), IndexError, "Sequential: index {} is out of range for {} layers", i,
               layers_.size());
  return layers_[i];
}

// Note [Fusing a Sequential's layers]
// With fuse() on, a Conv2d directly followed by a ReLU runs as one fused convolution (conv2d_relu: oneDNN's ReLU
// post-op on the CPU, cuDNN's fused bias + activation on the GPU), without the separate ReLU pass over the output and
// the tensor it would allocate. When a MaxPool2d follows the ReLU, the three run as convolution, pooling, ReLU
// instead: the ReLU is monotonic, so the maximum of its values over a window is its value at the window's maximum,
// and the gradient reaches the same input element behind the same sign test (a window whose maximum is <= 0 passes
// no gradient either way). The ReLU's backward mask then runs on the pooled quarter of the convolution output (2x2
// pooling): three fewer passes over the reference network's largest tensor per step (docs/benchmarks.md,
// "Measurements behind the CPU decisions"). Runs of such triples also keep their activations in the backend's
// blocked layout (Note [Activations in oneDNN's blocked layout] in blocked.cpp).
// What fusion may change, exactly. On the CPU the output and every gradient are the bits of the layers run one by
// one, except the weight and bias gradients of a blocked run's first convolution when they take the GEMM of thin
// convolutions (Note [Weight gradients of thin convolutions]: few input channels, as in a network's first layer):
// that GEMM reads grad_output a block of channels at a time, so it adds the same products in another order, and
// those two gradients differ by the rounding of float32 sums. Measured on the reference network (AVX-512, batch 32
// and 64, 5 seeds each): at most 2.7e-7 of the gradient's largest element; python/tests/test_sequential_fusion.py holds
// them within 1e-5 of it and the rest to equal bits. On a GPU, cuDNN's fused call may choose another algorithm than
// the separate convolution, so values and gradients may differ by rounding there too (not measured yet). A run's
// results thus depend on whether it fuses, as they do on the thread count of its GEMMs; never more than rounding.
// There is one implementation of the rule, run_layers: C++'s Sequential calls it, and Python's fused Sequential hands
// it each run of children that are C++ layers, so a Python network and strata-train's give the same bits.
// It is a switch, off by default, rather than a rewrite Sequential does on its own: a user's list of layers runs as
// written unless they ask, and a printed autograd graph (grad_fn names) shows the ops of the list. Layers are matched
// by exact type, so a subclass (which may override forward) is never fused, and layers called one by one
// (model[i](x)) are not rearranged.
Tensor Sequential::forward(const Tensor& input) { return run_layers(layers_, input, fuse_); }

Tensor run_layers(const std::vector<std::shared_ptr<Layer>>& layers, const Tensor& input, bool fuse) {
  for (const auto& layer : layers) {
    STRATA_CHECK(layer != nullptr, InvalidArgumentError, "run_layers: a layer is null");
  }
  const auto is = [&](std::size_t i, const std::type_info& type) {
    if (i >= layers.size()) return false;
    const Layer& layer = *layers[i];
    return typeid(layer) == type;
  };
  const auto conv_relu_pool = [&](std::size_t i) {
    return is(i, typeid(Conv2d)) && is(i + 1, typeid(ReLU)) && is(i + 2, typeid(MaxPool2d));
  };
  // Note [Activations in oneDNN's blocked layout]: the run of triples from i stays blocked while every
  // convolution's output channels fill whole blocks.
  const auto blocks_fill = [&](std::size_t i, int64_t block) {
    return block > 0 && conv_relu_pool(i) && static_cast<const Conv2d&>(*layers[i]).options.out_channels % block == 0;
  };
  Tensor x = input;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (!fuse) {
      x = (*layers[i])(x);
    } else if (const int64_t block = conv_relu_pool(i) && x.defined() ? blocked::block_size(x.device(), x.dtype()) : 0;
               blocks_fill(i, block)) {
      for (int64_t in_block = 0; blocks_fill(i, block); i += 3, in_block = block) {  // the run's input is NCHW
        const auto& pool = static_cast<const MaxPool2d&>(*layers[i + 2]).options;
        x = static_cast<Conv2d&>(*layers[i]).call_blocked(x, in_block, block);
        const bool last = !blocks_fill(i + 3, block);  // the run's last pooling gives NCHW
        x = relu(blocked::max_pool2d(x, pool.kernel_size, pool.stride_, pool.padding_, block, last));
      }
      --i;  // the loop's ++i moves to the layer after the run
    } else if (conv_relu_pool(i)) {
      x = relu((*layers[i + 2])((*layers[i])(x)));
      i += 2;
    } else if (is(i, typeid(Conv2d)) && is(i + 1, typeid(ReLU))) {
      x = static_cast<Conv2d&>(*layers[i]).call_with_relu(x);
      ++i;
    } else {
      x = (*layers[i])(x);
    }
  }
  return x;
}

}  // namespace strata::nn
