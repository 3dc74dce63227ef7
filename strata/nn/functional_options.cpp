#include "strata/nn/functional_options.h"

namespace strata::nn::functional {

Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& o) {
  return conv2d(input, weight, o.bias_, o.stride_, o.padding_, o.dilation_, o.groups_);
}

Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& o) {
  return max_pool2d(input, o.kernel_size_, o.stride_, o.padding_);
}

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& o) {
  return batch_norm(input, running_mean, running_var, o.weight_, o.bias_, o.training_, o.momentum_, o.eps_);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyFuncOptions& o) {
  return cross_entropy(logits, target, o.reduction_, o.label_smoothing_, o.ignore_index_);
}

}  // namespace strata::nn::functional
