#pragma once

namespace strata {

/// The op running on this thread, for error messages from layers below ops (the allocator's OOM message); nullptr
/// outside any op.
const char* current_op();

/// Names the op running on this thread for its lifetime.
class OpScope {
 public:
  explicit OpScope(const char* op);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* previous_;
};

}  // namespace strata
