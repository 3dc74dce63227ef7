#pragma once

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

}  // namespace strata
