#include "strata/tensor/grad_hook.h"

#include <atomic>

#include "strata/core/error.h"

namespace strata {

namespace {
thread_local bool grad_mode = true;
std::atomic<detail::RecordFn> record_fn{nullptr};
}  // namespace

bool grad_enabled() { return grad_mode; }
void set_grad_enabled(bool enabled) { grad_mode = enabled; }

namespace detail {

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_mode) return false;
  for (const Tensor* t : inputs) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

void set_record_fn(RecordFn fn) { record_fn.store(fn); }

void record(const char* op, std::initializer_list<const Tensor*> inputs, Tensor& output, BackwardFn backward) {
  RecordFn fn = record_fn.load();
  STRATA_CHECK(fn != nullptr, NotImplementedError, "{}: autograd is not available in this build", op);
  std::vector<Tensor> parents;
  parents.reserve(inputs.size());
  for (const Tensor* t : inputs) parents.push_back(*t);
  fn(op, parents, output, std::move(backward));
}

}  // namespace detail
}  // namespace strata
