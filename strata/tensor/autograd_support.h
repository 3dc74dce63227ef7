#pragma once

// Helpers for the derivative formulas of the tensors layer (Note [Autograd hooks in the tensors layer]).

#include <vector>

#include "strata/tensor/grad_hook.h"
#include "strata/tensor/tensor.h"

namespace strata::detail {

/// Sums a broadcast gradient `g` back to `shape` (the shape of the input that was broadcast).
Tensor sum_to(const Tensor& g, const Shape& shape);

/// The gradient for `input`: `g` summed to input's shape and converted to input's dtype.
Tensor grad_like(const Tensor& g, const Tensor& input);

/// The gradient of a reduction's output `g` spread back to `in_shape` (unsqueezing the reduced dims when the
/// reduction dropped them; `dims` empty means all dims). A view with stride 0 on the reduced dims.
Tensor unreduce(const Tensor& g, const Shape& in_shape, const std::vector<int64_t>& dims, bool keepdim);

/// relu's derivative applied to `g`: g where `x` > 0, else 0, in one kernel. `x` may be relu's input or its output
/// (the same mask), so fused producers such as conv2d_relu can use it with the result they kept.
Tensor relu_backward(const Tensor& g, const Tensor& x);

/// Whether grad mode is on and one of `inputs` requires grad (needs_grad for a list of any length).
bool needs_grad_list(const std::vector<Tensor>& inputs);

/// detail::record for a list of inputs of any length.
void record_list(const char* op, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn backward);

// Note [In-place ops and autograd]
// In-place ops are not recorded: writing into a tensor that requires grad would silently corrupt the gradients
// that depend on its old values. So with grad mode on, an in-place op on a tensor that requires grad (a leaf or an
// op's result) throws InvalidArgumentError; under NoGradGuard (optimizer updates, gradient accumulation) it runs.
/// Throws when `self` must not be written in place (see the note).
void check_in_place(const char* op, const Tensor& self);

}  // namespace strata::detail
