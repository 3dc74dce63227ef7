#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "strata/tensor/grad_hook.h"

namespace strata {

/// Turns off graph recording on this thread for its lifetime (inference, optimizer steps).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

namespace autograd {

/// Runs `callback` once the backward pass running on this thread has finished (PyTorch's queue_callback), after
/// every gradient has been accumulated; callbacks queued while one runs run too, in order. Throws
/// InvalidArgumentError outside a backward pass. DistributedDataParallel waits for its last buckets here.
void queue_callback(std::function<void()> callback);

/// A number that changes with each backward pass started on this thread (0 before the first): tells a hook whether
/// it is still in the pass it last saw, or in a new one after an earlier pass ended by an exception.
uint64_t backward_pass_id();

/// The gradients of the sum of `outputs` (each weighted by its grad_outputs entry; may be empty for one-element
/// outputs) with respect to `inputs`, without accumulating into any tensor's grad() (torch.autograd.grad). An input
/// that the outputs do not depend on is an error, or an undefined tensor with `allow_unused`. Gradients of
/// gradients (create_graph) are not available: the backward pass is not itself recorded.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                         const std::vector<Tensor>& inputs, bool retain_graph = false, bool allow_unused = false);

/// Makes backward keep the gradient of `t`, a result of ops, in t.grad() as it does for leaves (a no-op on leaves).
void retain_grad(const Tensor& t);
/// Whether backward keeps t's gradient in t.grad(): a leaf that requires grad, or a result after retain_grad.
bool retains_grad(const Tensor& t);

}  // namespace autograd
}  // namespace strata
