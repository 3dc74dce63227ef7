#pragma once

#include <functional>
#include <memory>
#include <mutex>
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

/// The version a value had when an op recorded it (Note [Version counters]). The storage is held weakly: memory that
/// is gone cannot be written any more, and a value the derivative does not capture must not be kept alive.
struct SavedVersion {
  std::weak_ptr<Storage> storage;
  uint64_t version = 0;
  int index = 0;  // the op's input index, or -1 for its output
};

/// A step of the backward graph: one op's derivative, or a leaf's gradient accumulator.
struct Node {
  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /// Frees the nodes that only this one keeps alive without recursion (Note [Freeing deep graphs]).
  ~Node();

  std::string name;
  BackwardFn backward;       // empty for accumulators and after a backward pass without retain_graph
  std::vector<Edge> next;    // one per input of the op
  std::vector<TensorHook> pre_hooks;  // hooks registered on the op's output tensor
  std::weak_ptr<AutogradMeta> leaf;   // set for accumulators: the leaf tensor's meta (gone with the leaf)
  bool accumulates = false;           // a leaf's accumulator, not an op
  std::vector<SavedVersion> saved;    // the values `backward` reads, checked before it runs
  bool released = false;
};

}  // namespace autograd

/// The autograd state of a tensor (shared by all copies of a Tensor handle).
struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;  // a non-leaf whose gradient is kept in `grad` (autograd::retain_grad)
  // Guards `grad` and `grad_accumulator`: threads that share a leaf (a parameter) may run backward, read or clear
  // its gradient at once, and accumulation into it is then the sum of theirs, as in PyTorch.
  std::mutex mutex;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;               // the op that produced this tensor; null for leaves
  std::weak_ptr<autograd::Node> grad_accumulator;        // leaves: the node that accumulates into `grad`
  std::vector<autograd::TensorHook> hooks;               // leaves: applied before accumulation
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;  // leaves: called after, with `grad`
};

}  // namespace strata
