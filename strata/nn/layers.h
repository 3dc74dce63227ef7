#pragma once

// Layers: thin modules over nn/functional.h, with PyTorch's default initialisation. Options read like LibTorch:
//   Conv2d(Conv2dOptions(3, 16, 3).stride(2).padding(1).device("cuda"))
// and a model is a Sequential of layers:
//   Sequential model(Linear(2, 8), Tanh(), Linear(8, 1));

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/nn/functional.h"
#include "strata/nn/module.h"
#include "strata/tensor/factories.h"

namespace strata::nn {

using functional::Pair;

/// Module::parameter_member for a layer whose parameters are the members `weight` and (when given) `bias`.
inline Tensor* weight_or_bias(const std::string& name, Tensor& weight, Tensor* bias) {
  if (name == "weight") return &weight;
  return name == "bias" ? bias : nullptr;
}

// --- linear (layers.cpp) ---

struct LinearOptions {
  int64_t in_features, out_features;
  bool bias_ = true;
  TensorOptions tensor_options_;
  LinearOptions(int64_t in, int64_t out) : in_features(in), out_features(out) {}
  LinearOptions& bias(bool b) { bias_ = b; return *this; }
  LinearOptions& dtype(DType d) { tensor_options_.dtype(d); return *this; }
  LinearOptions& device(Device d) { tensor_options_.device(d); return *this; }
};

/// y = x W^T + b; weight [out, in] and bias [out] start U(-1/sqrt(in), 1/sqrt(in)) as in PyTorch.
/// in_features = -1 makes the layer lazy (Gluon's deferred initialisation): weight is registered as [out, 0] and
/// takes its real shape, in place, from the first input, so handles taken before (an optimizer) stay valid.
class Linear : public Layer {
 public:
  explicit Linear(const LinearOptions& options);
  Linear(int64_t in_features, int64_t out_features, bool bias = true, TensorOptions tensor_options = {});
  /// Draws the weight and bias again from their default distributions.
  void reset_parameters();
  Tensor forward(const Tensor& input) override;
  /// False for a lazy layer until its first forward.
  bool is_initialized() const { return options.in_features >= 0; }

  LinearOptions options;
  Tensor weight;
  Tensor bias;  // undefined when options.bias_ is false

 protected:
  Tensor* parameter_member(const std::string& name) override { return weight_or_bias(name, weight, &bias); }
};
/// Gluon's and Keras's name for Linear.
using Dense = Linear;

// --- activations and reshaping (layers.cpp) ---

class ReLU : public Layer {
 public:
  ReLU() : Layer("ReLU") {}
  Tensor forward(const Tensor& input) override;
};
/// GELU, exact (erf) by default; approximate = "tanh" takes the tanh form, as PyTorch's nn.GELU(approximate=...).
class GELU : public Layer {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;
  const std::string& approximate() const { return approximate_; }

 private:
  std::string approximate_;
};
class Tanh : public Layer {
 public:
  Tanh() : Layer("Tanh") {}
  Tensor forward(const Tensor& input) override;
};
class Sigmoid : public Layer {
 public:
  Sigmoid() : Layer("Sigmoid") {}
  Tensor forward(const Tensor& input) override;
};
/// Flattens dims start_dim..end_dim (by default all but the batch dim).
class Flatten : public Layer {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Layer("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& input) override;

 private:
  int64_t start_dim_, end_dim_;
};

// --- convolution and pooling (layers_dnn.cpp) ---

struct Conv2dOptions {
  int64_t in_channels, out_channels;
  Pair kernel_size;
  Pair stride_ = 1, padding_ = 0, dilation_ = 1;
  int64_t groups_ = 1;
  bool bias_ = true;
  TensorOptions tensor_options_;
  Conv2dOptions(int64_t in, int64_t out, Pair kernel) : in_channels(in), out_channels(out), kernel_size(kernel) {}
  Conv2dOptions& stride(Pair s) { stride_ = s; return *this; }
  Conv2dOptions& padding(Pair p) { padding_ = p; return *this; }
  Conv2dOptions& dilation(Pair d) { dilation_ = d; return *this; }
  Conv2dOptions& groups(int64_t g) { groups_ = g; return *this; }
  Conv2dOptions& bias(bool b) { bias_ = b; return *this; }
  Conv2dOptions& dtype(DType d) { tensor_options_.dtype(d); return *this; }
  Conv2dOptions& device(Device d) { tensor_options_.device(d); return *this; }
};

/// 2-D convolution over NCHW input; weight [out, in/groups, kH, kW] and bias [out] start U(-1/sqrt(fan_in), ...).
class Conv2d : public Layer {
 public:
  explicit Conv2d(const Conv2dOptions& options);
  void reset_parameters();
  Tensor forward(const Tensor& input) override;
  /// relu(forward(input)) as one fused convolution (functional::conv2d_relu), checking the input's device as
  /// operator() does. A fused Sequential calls it for a Conv2d followed by a ReLU (Note [Fusing a Sequential's
  /// layers]).
  Tensor call_with_relu(const Tensor& input);
  /// forward(input) in a backend's blocked layout (Note [Activations in oneDNN's blocked layout]): an NCHW input
  /// (`in_block` 0) or a blocked one, a blocked output [N, O/block, OH, OW, block]; for a fused Sequential.
  Tensor call_blocked(const Tensor& input, int64_t in_block, int64_t block);

  Conv2dOptions options;
  Tensor weight;
  Tensor bias;

 protected:
  Tensor* parameter_member(const std::string& name) override { return weight_or_bias(name, weight, &bias); }
};

struct Pool2dOptions {
  Pair kernel_size;
  std::optional<Pair> stride_;  // defaults to the kernel size
  Pair padding_ = 0;
  Pool2dOptions(Pair kernel) : kernel_size(kernel) {}  // NOLINT: MaxPool2d({2, 3}) reads like PyTorch
  Pool2dOptions(int64_t kernel) : kernel_size(kernel) {}  // NOLINT: MaxPool2d(2)
  Pool2dOptions& stride(Pair s) { stride_ = s; return *this; }
  Pool2dOptions& padding(Pair p) { padding_ = p; return *this; }
};
using MaxPool2dOptions = Pool2dOptions;
using AvgPool2dOptions = Pool2dOptions;

class MaxPool2d : public Layer {
 public:
  explicit MaxPool2d(const Pool2dOptions& options) : Layer("MaxPool2d"), options(options) {}
  Tensor forward(const Tensor& input) override;
  Pool2dOptions options;
};
class AvgPool2d : public Layer {
 public:
  explicit AvgPool2d(const Pool2dOptions& options) : Layer("AvgPool2d"), options(options) {}
  Tensor forward(const Tensor& input) override;
  Pool2dOptions options;
};
class AdaptiveAvgPool2d : public Layer {
 public:
  explicit AdaptiveAvgPool2d(Pair output_size) : Layer("AdaptiveAvgPool2d"), output_size(output_size) {}
  Tensor forward(const Tensor& input) override;
  Pair output_size;
};

// --- normalisation, dropout, embedding (layers_dnn.cpp) ---

struct BatchNorm2dOptions {
  int64_t num_features;
  double eps_ = 1e-5, momentum_ = 0.1;
  bool affine_ = true, track_running_stats_ = true;
  TensorOptions tensor_options_;
  BatchNorm2dOptions(int64_t features) : num_features(features) {}  // NOLINT: BatchNorm2d(16)
  BatchNorm2dOptions& eps(double e) { eps_ = e; return *this; }
  BatchNorm2dOptions& momentum(double m) { momentum_ = m; return *this; }
  BatchNorm2dOptions& affine(bool a) { affine_ = a; return *this; }
  BatchNorm2dOptions& track_running_stats(bool t) { track_running_stats_ = t; return *this; }
  BatchNorm2dOptions& dtype(DType d) { tensor_options_.dtype(d); return *this; }
  BatchNorm2dOptions& device(Device d) { tensor_options_.device(d); return *this; }
};

/// Batch normalisation per channel of NCHW input. Parameters weight (1) and bias (0) when affine; buffers
/// running_mean (0), running_var (1) and num_batches_tracked (i64) when tracking running statistics.
class BatchNorm2d : public Layer {
 public:
  explicit BatchNorm2d(const BatchNorm2dOptions& options);
  Tensor forward(const Tensor& input) override;

  BatchNorm2dOptions options;
  Tensor weight, bias;
  Tensor running_mean, running_var, num_batches_tracked;

 protected:
  Tensor* parameter_member(const std::string& name) override { return weight_or_bias(name, weight, &bias); }
};

struct LayerNormOptions {
  Shape normalized_shape;
  double eps_ = 1e-5;
  bool elementwise_affine_ = true;
  TensorOptions tensor_options_;
  LayerNormOptions(Shape shape) : normalized_shape(std::move(shape)) {}  // NOLINT: LayerNorm(Shape{64})
  LayerNormOptions& eps(double e) { eps_ = e; return *this; }
  LayerNormOptions& elementwise_affine(bool a) { elementwise_affine_ = a; return *this; }
  LayerNormOptions& dtype(DType d) { tensor_options_.dtype(d); return *this; }
  LayerNormOptions& device(Device d) { tensor_options_.device(d); return *this; }
};

/// Normalises over the trailing normalized_shape dims; weight (1) and bias (0) when elementwise_affine.
class LayerNorm : public Layer {
 public:
  explicit LayerNorm(const LayerNormOptions& options);
  Tensor forward(const Tensor& input) override;

  LayerNormOptions options;
  Tensor weight, bias;

 protected:
  Tensor* parameter_member(const std::string& name) override { return weight_or_bias(name, weight, &bias); }
};

/// Zeroes elements with probability p in training mode (scaling the rest by 1/(1-p)); identity in eval mode.
class Dropout : public Layer {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  double p;
};

/// A lookup table [num_embeddings, embedding_dim] indexed by integer tensors; starts N(0, 1).
class Embedding : public Layer {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, TensorOptions tensor_options = {});
  Tensor forward(const Tensor& indices) override;
  Tensor weight;

 protected:
  Tensor* parameter_member(const std::string& name) override { return weight_or_bias(name, weight, nullptr); }
};

// --- containers (layers.cpp) ---

/// Layers applied in order; child i is registered as "i", so parameters read "0.weight", "2.bias".
class Sequential : public Layer {
 public:
  Sequential() : Layer("Sequential") {}
  /// Sequential(Linear(2, 8), Tanh(), std::make_shared<Linear>(8, 1)): layers by value (moved in) or shared.
  template <typename... Layers>
  explicit Sequential(Layers&&... layers) : Sequential() {
    (push_back(std::forward<Layers>(layers)), ...);
  }

  void push_back(std::shared_ptr<Layer> layer);
  template <typename L, typename = std::enable_if_t<std::is_base_of_v<Layer, std::decay_t<L>>>>
  void push_back(L&& layer) {
    push_back(std::shared_ptr<Layer>(std::make_shared<std::decay_t<L>>(std::forward<L>(layer))));
  }
  template <typename L>
  void push_back(std::shared_ptr<L> layer) {
    push_back(std::shared_ptr<Layer>(std::move(layer)));
  }

  std::size_t size() const { return layers_.size(); }
  /// The i-th layer; IndexError when out of range.
  const std::shared_ptr<Layer>& operator[](std::size_t i) const;
  /// The i-th layer as its concrete type (nullptr when it is another type): model.at<Linear>(0)->weight.
  template <typename L>
  std::shared_ptr<L> at(std::size_t i) const {
    return std::dynamic_pointer_cast<L>((*this)[i]);
  }
  auto begin() const { return layers_.begin(); }
  auto end() const { return layers_.end(); }

  /// Turns fusion on or off (off by default, so that a list of layers runs as written): a Conv2d followed by a ReLU
  /// then runs as one fused convolution, and a Conv2d, ReLU, MaxPool2d as convolution, pooling, ReLU, with fewer
  /// passes over memory; what it may change in the results, rounding of some gradients, is in Note [Fusing a
  /// Sequential's layers] in layers.cpp. strata-train's network and Python's fused Sequential use it.
  Sequential& fuse(bool on = true) {
    fuse_ = on;
    return *this;
  }
  bool fused() const { return fuse_; }

  Tensor forward(const Tensor& input) override;

 private:
  std::vector<std::shared_ptr<Layer>> layers_;
  bool fuse_ = false;
};

/// `layers` applied in order to `input`, as a Sequential of them runs, fused when `fuse` (Note [Fusing a Sequential's
/// layers] in layers.cpp). The one implementation of the rule: Sequential::forward calls it, and so does Python's
/// fused Sequential for each run of its children that are C++ layers.
Tensor run_layers(const std::vector<std::shared_ptr<Layer>>& layers, const Tensor& input, bool fuse);

}  // namespace strata::nn
