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

namespace {
RecordFn installed_record_fn(const char* op) {
  RecordFn fn = record_fn.load();
  STRATA_CHECK(fn != nullptr, NotImplementedError, "{}: autograd is not available in this build", op);
  return fn;
}
}  // namespace

void record(const char* op, std::initializer_list<const Tensor*> inputs, Tensor& output, BackwardFn backward,
            Saves saves) {
  std::vector<Tensor> parents;
  parents.reserve(inputs.size());
  for (const Tensor* t : inputs) parents.push_back(*t);
  installed_record_fn(op)(op, parents, output, std::move(backward), saves);
}

void record_list(const char* op, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn backward, Saves saves) {
  installed_record_fn(op)(op, inputs, output, std::move(backward), saves);
}

}  // namespace detail
}  // namespace strata
