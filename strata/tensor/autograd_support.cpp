// Helpers for the derivative formulas of the tensors layer.

#include "strata/tensor/autograd_support.h"

#include "strata/core/error.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_checks.h"

namespace strata::detail {

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - shape.ssize();
  STRATA_CHECK(lead >= 0, ShapeError, "sum_to: gradient of shape {} cannot be summed to shape {}", g.shape(), shape);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && g.size(d) != 1)) dims.push_back(d);
  }
  Tensor r = dims.empty() ? g : sum(g, dims, /*keepdim=*/true);
  return r.reshape(shape);
}

Tensor grad_like(const Tensor& g, const Tensor& input) { return grad_like(g, input.shape(), input.dtype()); }

Tensor grad_like(const Tensor& g, const Shape& shape, DType dtype) {
  Tensor r = sum_to(g, shape);
  return r.dtype() == dtype ? r : r.to(dtype);
}

Tensor unreduce(const Tensor& g, const Shape& in_shape, const std::vector<int64_t>& dims, bool keepdim) {
  const auto n = in_shape.ssize();
  Tensor r = g;
  if (!keepdim && n > 0) {
    std::vector<bool> mask(static_cast<std::size_t>(n), dims.empty());
    for (int64_t d : dims) mask[static_cast<std::size_t>(d < 0 ? d + n : d)] = true;
    for (int64_t d = 0; d < n; ++d) {
      if (mask[static_cast<std::size_t>(d)]) r = r.unsqueeze(d);
    }
  }
  return r.expand(in_shape);
}

bool needs_grad_list(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

bool records_in_place(const char* op, const Tensor& self, std::initializer_list<const Tensor*> operands) {
  if (!grad_enabled() || !self.defined()) return false;
  bool recorded = self.requires_grad();
  for (const Tensor* t : operands) recorded = recorded || (t->defined() && t->requires_grad());
  if (!recorded) return false;
  STRATA_CHECK(!(self.requires_grad() && self.is_leaf()), InvalidArgumentError,
               "{}: a leaf tensor that requires grad is being used in an in-place operation; write it under "
               "no_grad() (as optimizers do), or work on a clone()",
               op);
  const bool covers_its_memory = self.offset() == 0 && self.is_contiguous() &&
                                 static_cast<std::size_t>(self.numel()) * self.element_size() == self.storage()->nbytes;
  const bool view = !covers_its_memory || (is_view_op(self.grad_fn_name()) && self.storage().use_count() > 1);
  STRATA_CHECK(!view, InvalidArgumentError,
               "{}: autograd cannot record an in-place operation on a view of another tensor (shape {}); use the "
               "out-of-place op, or assign through the base tensor (t[...] = v)",
               op, self.shape());
  return true;
}

Tensor& rebase_history(const char* op, Tensor& self, const Tensor& result) {
  STRATA_CHECK(result.shape() == self.shape(), ShapeError,
               "{}: the result has shape {}, but an in-place op must keep self's shape {}", op, result.shape(),
               self.shape());
  STRATA_CHECK(is_floating(self.dtype()) || !is_floating(result.dtype()), DTypeError,
               "{}: the result dtype {} cannot be stored in self's dtype {}", op, result.dtype(), self.dtype());
  copy_values(self, result);  // bumps the version
  if (!result.requires_grad()) {
    // The new values depend on nothing that requires grad: the old history gets no gradient through them.
    record(
        op, {&self}, self, [](const Tensor&) { return std::vector<Tensor>{Tensor()}; }, Saves::kNothing);
    return self;
  }
  record(
      op, {&result}, self,
      [dtype = result.dtype()](const Tensor& g) { return std::vector<Tensor>{g.dtype() == dtype ? g : g.to(dtype)}; },
      Saves::kNothing);
  return self;
}

}  // namespace strata::detail
