// Helpers for the derivative formulas of the tensors layer.

#include "strata/tensor/autograd_support.h"

#include "strata/core/error.h"
#include "strata/tensor/functions.h"

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

Tensor grad_like(const Tensor& g, const Tensor& input) {
  Tensor r = sum_to(g, input.shape());
  return r.dtype() == input.dtype() ? r : r.to(input.dtype());
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

void record_list(const char* op, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn backward) {
  // detail::record takes an initializer_list; lists longer than 8 are joined by the caller in groups (see cat).
  const auto p = [&](std::size_t i) { return &inputs[i]; };
  switch (inputs.size()) {
    case 1: return record(op, {p(0)}, output, std::move(backward));
    case 2: return record(op, {p(0), p(1)}, output, std::move(backward));
    case 3: return record(op, {p(0), p(1), p(2)}, output, std::move(backward));
    case 4: return record(op, {p(0), p(1), p(2), p(3)}, output, std::move(backward));
    case 5: return record(op, {p(0), p(1), p(2), p(3), p(4)}, output, std::move(backward));
    case 6: return record(op, {p(0), p(1), p(2), p(3), p(4), p(5)}, output, std::move(backward));
    case 7: return record(op, {p(0), p(1), p(2), p(3), p(4), p(5), p(6)}, output, std::move(backward));
    case 8: return record(op, {p(0), p(1), p(2), p(3), p(4), p(5), p(6), p(7)}, output, std::move(backward));
    default:
      STRATA_THROW(InvalidArgumentError, "{}: record_list takes at most 8 inputs, got {}", op, inputs.size());
  }
}

void check_in_place(const char* op, const Tensor& self) {
  STRATA_CHECK(!(grad_enabled() && self.defined() && self.requires_grad()), InvalidArgumentError,
               "{}: in-place op on a tensor that requires grad is not supported (in-place ops are not recorded by "
               "autograd); use the out-of-place op, or run it under NoGradGuard (e.g. an optimizer update)",
               op);
}

}  // namespace strata::detail
