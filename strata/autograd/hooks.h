#pragma once

// Hooks that can be taken off again (PyTorch's RemovableHandle): what a wrapper that hooks into other people's
// parameters needs, so that dropping the wrapper leaves the parameters as they were.

#include <functional>
#include <memory>

#include "strata/tensor/tensor.h"

namespace strata {
struct AutogradMeta;
}

namespace strata::autograd {

/// Takes off the hook it was returned for. remove() may be called any number of times, and after the tensor is gone;
/// dropping the handle without calling it leaves the hook in place, as PyTorch's RemovableHandle does. Not while a
/// backward pass runs through the tensor on another thread (hooks are registered and removed between passes).
class RemovableHandle {
 public:
  RemovableHandle() = default;
  RemovableHandle(std::weak_ptr<AutogradMeta> meta, std::shared_ptr<const void> token)
      : meta_(std::move(meta)), token_(std::move(token)) {}
  void remove();
  /// False once remove() has run (or for a default-constructed handle).
  bool active() const { return token_ != nullptr; }

 private:
  std::weak_ptr<AutogradMeta> meta_;
  std::shared_ptr<const void> token_;  // identifies the hook among the tensor's hooks
};

/// Tensor::register_post_accumulate_grad_hook, returning a handle that takes the hook off again.
RemovableHandle register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(const Tensor& grad)> hook);

}  // namespace strata::autograd
