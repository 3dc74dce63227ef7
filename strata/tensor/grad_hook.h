#pragma once

#include <functional>
#include <initializer_list>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata {

// Note [Autograd hooks in the tensors layer]
// Each differentiable op of the tensors layer states its derivative next to its definition, as a closure that maps
// the gradient of its output to the gradients of its inputs. When grad mode is on and an input requires grad, the
// op hands (inputs, output, closure) to `detail::record`, which the autograd layer implements by building a graph
// node (autograd/engine.cpp installs it at load time: the arrow points up through a callback, never a #include).
// The check costs a thread-local read and a pointer test per input, so ops without autograd pay nothing more.

/// Gradients of an op's inputs (one per input, undefined when that input needs none) from its output's gradient.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

/// Whether ops record the autograd graph on this thread (NoGradGuard turns it off).
bool grad_enabled();
void set_grad_enabled(bool enabled);

namespace detail {

/// True when grad mode is on and one of `inputs` requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);

using RecordFn = void (*)(const char* op, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn backward);
/// Installed by the autograd layer.
void set_record_fn(RecordFn fn);
/// Makes `output` a node of the graph with `inputs` as its parents.
void record(const char* op, std::initializer_list<const Tensor*> inputs, Tensor& output, BackwardFn backward);

}  // namespace detail
}  // namespace strata
