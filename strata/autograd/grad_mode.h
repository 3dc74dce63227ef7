#pragma once

#include <cstdint>
#include <functional>

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

}  // namespace autograd
}  // namespace strata
