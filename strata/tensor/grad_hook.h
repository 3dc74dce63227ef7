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

// Note [Version counters]
// Every in-place write bumps the version of the memory it writes (Storage::version, shared by all views of it). An op
// whose derivative reads the values of its inputs (or of its output) says so when it records; the graph node keeps
// their versions, and backward refuses to run it when one has changed since, as PyTorch refuses ("modified by an
// inplace operation"), instead of computing a gradient from values the forward pass never saw.

/// Which values an op's derivative reads, so that backward can check they were not written in place since.
enum class Saves {
  kInputs,           // the derivative reads its inputs' values (products, relu, conv...): the safe default
  kInputsAndOutput,  // ...and its output's (exp and the other unary math, clamp, div, pow, max)
  kOutput,           // its output's only (softmax, log_softmax)
  kNothing,          // shapes only: add, sub, views, copies, sums
};

using RecordFn = void (*)(const char* op, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn backward,
                          Saves saves);
/// Installed by the autograd layer.
void set_record_fn(RecordFn fn);
/// Makes `output` a node of the graph with `inputs` as its parents. `output` may be one of `inputs` (an in-place op
/// rebasing a tensor's history): the edges are taken before the output's history is replaced.
void record(const char* op, std::initializer_list<const Tensor*> inputs, Tensor& output, BackwardFn backward,
            Saves saves = Saves::kInputs);
/// detail::record for a list of inputs of any length.
void record_list(const char* op, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn backward,
                 Saves saves = Saves::kInputs);

}  // namespace detail
}  // namespace strata
