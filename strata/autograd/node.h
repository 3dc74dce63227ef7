#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/tensor/grad_hook.h"
#include "strata/tensor/tensor.h"

namespace strata {

namespace autograd {

struct Node;

/// Where an input's gradient goes: the node that produced the input (nullptr when it needs no gradient).
struct Edge {
  std::shared_ptr<Node> node;
};

using TensorHook = std::function<Tensor(const Tensor&)>;

/// A step of the backward graph: one op's derivative, or a leaf's gradient accumulator.
struct Node {
  std::string name;
  BackwardFn backward;       // empty for accumulators and after a backward pass without retain_graph
  std::vector<Edge> next;    // one per input of the op
  std::vector<TensorHook> pre_hooks;  // hooks registered on the op's output tensor
  std::weak_ptr<AutogradMeta> leaf;   // set for accumulators: the leaf tensor's meta
  bool released = false;
};

}  // namespace autograd

/// The autograd state of a tensor (shared by all copies of a Tensor handle).
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;               // the op that produced this tensor; null for leaves
  std::weak_ptr<autograd::Node> grad_accumulator;        // leaves: the node that accumulates into `grad`
  std::vector<autograd::TensorHook> hooks;               // leaves: applied before accumulation
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;  // leaves: called after, with `grad`
};

}  // namespace strata
