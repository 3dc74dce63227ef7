#pragma once

// Helpers for the derivative formulas of the tensors layer (Note [Autograd hooks in the tensors layer]).

#include <string_view>
#include <vector>

#include "strata/tensor/grad_hook.h"
#include "strata/tensor/tensor.h"

namespace strata::detail {

/// Sums a broadcast gradient `g` back to `shape` (the shape of the input that was broadcast).
Tensor sum_to(const Tensor& g, const Shape& shape);

/// The gradient for `input`: `g` summed to input's shape and converted to input's dtype.
Tensor grad_like(const Tensor& g, const Tensor& input);
/// The same for an input of `shape` and `dtype` (what a derivative keeps instead of the input itself).
Tensor grad_like(const Tensor& g, const Shape& shape, DType dtype);

/// The gradient of a reduction's output `g` spread back to `in_shape` (unsqueezing the reduced dims when the
/// reduction dropped them; `dims` empty means all dims). A view with stride 0 on the reduced dims.
Tensor unreduce(const Tensor& g, const Shape& in_shape, const std::vector<int64_t>& dims, bool keepdim);

/// relu's derivative applied to `g`: g where `x` > 0, else 0, in one kernel. `x` may be relu's input or its output
/// (the same mask), so fused producers such as conv2d_relu can use it with the result they kept.
Tensor relu_backward(const Tensor& g, const Tensor& x);

/// Whether grad mode is on and one of `inputs` requires grad (needs_grad for a list of any length).
bool needs_grad_list(const std::vector<Tensor>& inputs);

// Note [In-place ops and autograd]
// PyTorch's rules. With grad mode on, an in-place op on a leaf that requires grad throws: it would change the values
// its gradient is taken at (an optimizer writes them under no_grad). On any other tensor, when the tensor or an
// operand requires grad, the op is recorded by rebasing the tensor's history: the result is computed out of place
// (from a copy of the old values when the derivative reads them), written into the tensor, and the tensor's
// grad_fn becomes the result's; the old history still gets its gradient through the result. Every write bumps the
// memory's version (Note [Version counters]), so a derivative that saved the old values refuses to run.
// A view shares memory with its base, whose history autograd would have to rebase too; so a recorded in-place op on
// a view is refused, except t[...] = v (assign_view), which writes through the base. A view is a tensor that covers
// part of its memory, or the result of a view op whose memory another tensor still shares.

/// True when the in-place op `op` on `self` with `operands` must be recorded (grad mode on, and self or an operand
/// requires grad); throws when it must not run (see the note).
bool records_in_place(const char* op, const Tensor& self, std::initializer_list<const Tensor*> operands);

/// Whether `op` is one of the view ops of tensor/views.cpp, whose result shares its input's memory.
bool is_view_op(std::string_view op);

/// Writes `result` (computed out of place, with its own history) into `self` and makes it self's history.
Tensor& rebase_history(const char* op, Tensor& self, const Tensor& result);

}  // namespace strata::detail
