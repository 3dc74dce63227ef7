// The backward pass: builds graph nodes for recorded ops and runs them in reverse topological order.

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "strata/autograd/grad_mode.h"
#include "strata/autograd/node.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata {

namespace {

using autograd::Edge;
using autograd::Node;

std::shared_ptr<AutogradMeta>& meta_of(const Tensor& t) { return t.autograd_meta(); }

// The node an input's gradient flows to: its grad_fn, or for a leaf that requires grad its accumulator.
Edge edge_of(const Tensor& t) {
  auto& meta = meta_of(t);
  if (!meta || !meta->requires_grad) return {};
  if (meta->grad_fn) return {meta->grad_fn};
  std::lock_guard<std::mutex> lock(meta->mutex);  // threads sharing a leaf share its one accumulator
  auto accumulator = meta->grad_accumulator.lock();
  if (!accumulator) {
    accumulator = std::make_shared<Node>();
    accumulator->name = "AccumulateGrad";
    accumulator->leaf = meta;
    accumulator->accumulates = true;
    meta->grad_accumulator = accumulator;
  }
  return {accumulator};
}

void record_node(const char* op, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn backward,
                 detail::Saves saves) {
  auto node = std::make_shared<Node>();
  node->name = op;
  node->backward = std::move(backward);
  node->next.reserve(inputs.size());
  for (const Tensor& input : inputs) node->next.push_back(edge_of(input));
  if (saves == detail::Saves::kInputs || saves == detail::Saves::kInputsAndOutput) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].defined()) node->saved.push_back({inputs[i].storage(), inputs[i].version(), static_cast<int>(i)});
    }
  }
  if (saves == detail::Saves::kInputsAndOutput || saves == detail::Saves::kOutput)
    node->saved.push_back({output.storage(), output.version(), -1});
  auto& meta = meta_of(output);
  if (!meta) meta = std::make_shared<AutogradMeta>();
  meta->requires_grad = true;
  meta->grad_fn = std::move(node);
}

const bool installed = [] {
  detail::set_record_fn(&record_node);
  return true;
}();

Tensor apply_hooks(const std::vector<autograd::TensorHook>& hooks, Tensor grad) {
  for (const auto& hook : hooks) {
    Tensor replaced = hook(grad);
    if (!replaced.defined()) continue;
    // A gradient of another shape, dtype or device would reach .grad() or the next node unnoticed.
    STRATA_CHECK(
        replaced.shape() == grad.shape() && replaced.dtype() == grad.dtype() && replaced.device() == grad.device(),
        InvalidArgumentError,
        "backward: a hook returned a gradient of {} {} on {} for a gradient of {} {} on {}; a hook may "
        "change the values only",
        replaced.shape(), replaced.dtype(), replaced.device(), grad.shape(), grad.dtype(), grad.device());
    grad = std::move(replaced);
  }
  return grad;
}

// The callbacks of the backward pass running on this thread (autograd::queue_callback); null outside one.
thread_local std::vector<std::function<void()>>* queued_callbacks = nullptr;
thread_local uint64_t backward_passes = 0;

void accumulate(AutogradMeta& meta, Tensor grad) {
  Tensor g = apply_hooks(meta.hooks, std::move(grad));
  Tensor accumulated;
  {
    std::lock_guard<std::mutex> lock(meta.mutex);
    if (!meta.grad.defined()) {
      // Later accumulation is in place, so the gradient must be a tensor nobody else holds: the one the backward pass
      // computed when only the engine holds it (as PyTorch's AccumulateGrad steals it), a copy otherwise. Stealing
      // spares copying every parameter's gradient on every step.
      meta.grad = g.is_sole_owner() && g.is_contiguous() ? std::move(g) : g.clone();
    } else {
      add_(meta.grad, g);
    }
    accumulated = meta.grad;
  }
  // Outside the lock: a hook (DDP's) may read or replace the gradient itself.
  for (const auto& hook : meta.post_accumulate_hooks) hook(accumulated);
}

// Refuses to run a derivative whose saved values were written in place since (Note [Version counters]).
void check_saved_versions(const Node& node) {
  for (const autograd::SavedVersion& saved : node.saved) {
    const std::shared_ptr<Storage> storage = saved.storage.lock();
    if (!storage) continue;
    const uint64_t now = storage->version.load(std::memory_order_relaxed);
    STRATA_CHECK(now == saved.version, InvalidArgumentError,
                 "backward: one of the variables needed for gradient computation has been modified by an inplace "
                 "operation: {} of '{}' is at version {}; expected version {} instead. Look for an in-place write "
                 "(t[...] = v, an op ending in _, an optimizer step) between the forward pass and backward, or clone "
                 "the value before writing it",
                 saved.index < 0 ? std::string("the output") : "input " + std::to_string(saved.index), node.name, now,
                 saved.version);
  }
}

// Note [Freeing deep graphs]
// A node owns the nodes of its inputs (its edges), and its derivative's closure owns tensors that own theirs, so
// releasing a chain of 300 000 ops (a running loss kept as a tensor) would nest 300 000 destructors and overflow the
// stack. ~Node moves the nodes it owns onto a list of the thread's, which the outermost ~Node empties in a loop, so
// destructors nest at most a few deep whatever the depth of the graph (PyTorch's deleteNode does the same).
thread_local std::vector<std::shared_ptr<Node>>* nodes_to_free = nullptr;

}  // namespace

namespace autograd {

Node::~Node() {
  std::vector<std::shared_ptr<Node>> freed_here;
  const bool outermost = nodes_to_free == nullptr;
  if (outermost) nodes_to_free = &freed_here;
  for (Edge& e : next) {
    if (e.node) nodes_to_free->push_back(std::move(e.node));
  }
  // The members that own tensors are released here, while the list is set, so that the nodes they free land on it.
  next.clear();
  backward = nullptr;
  pre_hooks.clear();
  if (!outermost) return;
  while (!freed_here.empty()) {
    std::shared_ptr<Node> node = std::move(freed_here.back());
    freed_here.pop_back();
    node.reset();  // when this was the last owner, its ~Node appends the nodes it owned
  }
  nodes_to_free = nullptr;
}

uint64_t backward_pass_id() { return backward_passes; }

void queue_callback(std::function<void()> callback) {
  STRATA_CHECK(queued_callbacks != nullptr, InvalidArgumentError,
               "queue_callback: no backward pass is running on this thread");
  queued_callbacks->push_back(std::move(callback));
}

namespace {

// Runs the queued callbacks when the pass ends, and leaves no dangling list behind when it throws.
class CallbackScope {
 public:
  CallbackScope() : previous_(std::exchange(queued_callbacks, &callbacks_)) {}
  ~CallbackScope() { queued_callbacks = previous_; }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
  void run() {
    for (std::size_t i = 0; i < callbacks_.size(); ++i) callbacks_[i]();  // by index: a callback may queue another
  }

 private:
  std::vector<std::function<void()>> callbacks_;
  std::vector<std::function<void()>>* previous_;
};

}  // namespace

namespace {

struct Root {
  std::shared_ptr<Node> node;
  Tensor grad;
};

// Runs a backward pass from `roots`. Without `captured` (Tensor::backward) leaves accumulate their gradients; with it
// (autograd::grad) the gradients reaching its nodes are stored there instead, and no leaf accumulates.
void execute(const std::vector<Root>& roots, bool retain_graph, std::unordered_map<Node*, Tensor>* captured) {
  (void)installed;
  CallbackScope callbacks;
  ++backward_passes;
  NoGradGuard no_grad;  // the backward pass itself is not recorded (no higher-order gradients)

  // Count, for every reachable node, how many edges lead into it.
  std::unordered_map<Node*, int> pending;
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  std::unordered_map<Node*, Tensor> grads;
  for (const Root& root : roots) {
    Tensor& slot = grads[root.node.get()];
    slot = slot.defined() ? add(slot, root.grad) : root.grad;
    if (seen.insert(root.node.get()).second) stack.push_back(root.node.get());
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next) {
      if (!e.node) continue;
      ++pending[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }

  std::vector<std::shared_ptr<Node>> ready;
  for (const Root& root : roots) {
    if (pending[root.node.get()] == 0 &&
        std::none_of(ready.begin(), ready.end(), [&](const auto& n) { return n == root.node; })) {
      ready.push_back(root.node);
    }
  }
  while (!ready.empty()) {
    std::shared_ptr<Node> node = std::move(ready.back());
    ready.pop_back();
    Tensor g = std::move(grads[node.get()]);
    grads.erase(node.get());
    if (g.defined()) g = apply_hooks(node->pre_hooks, std::move(g));
    if (captured != nullptr) {
      if (auto it = captured->find(node.get()); it != captured->end()) it->second = g;
    }
    if (node->accumulates) {
      // A leaf nobody holds any more has nowhere to keep its gradient: `ones(2).requires_grad_().sum().backward()`.
      if (auto leaf = node->leaf.lock(); captured == nullptr && leaf && g.defined()) accumulate(*leaf, std::move(g));
      continue;
    }
    std::vector<Tensor> input_grads;
    if (g.defined()) {
      STRATA_CHECK(!node->released, InvalidArgumentError,
                   "backward: trying to backward through the graph of '{}' a second time; its saved values were "
                   "freed after the first backward — pass retain_graph=true to the first call if you need to call it "
                   "twice",
                   node->name);
      check_saved_versions(*node);
      input_grads = node->backward(g);
      if (!retain_graph) {
        node->backward = nullptr;
        node->released = true;
      }
    }
    // Every edge is counted down, with or without a gradient, so that nodes reached by several paths still run.
    for (std::size_t i = 0; i < node->next.size(); ++i) {
      const Edge& e = node->next[i];
      if (!e.node) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        Tensor& slot = grads[e.node.get()];
        slot = slot.defined() ? add(slot, input_grads[i]) : input_grads[i];
      }
      if (--pending[e.node.get()] == 0) ready.push_back(e.node);
    }
  }
  callbacks.run();
}

}  // namespace

/// Runs the backward pass from `root` with the gradient `grad`.
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  const Edge start = edge_of(root);
  STRATA_CHECK(start.node != nullptr, InvalidArgumentError,
               "backward: the tensor does not require grad and has no grad_fn (did you call requires_grad_() on "
               "the inputs, or compute it under NoGradGuard?)");
  execute({Root{start.node, grad}}, retain_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                         const std::vector<Tensor>& inputs, bool retain_graph, bool allow_unused) {
  STRATA_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), InvalidArgumentError,
               "grad: {} outputs but {} grad_outputs", outputs.size(), grad_outputs.size());
  std::vector<Root> roots;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    const Edge start = out.defined() ? edge_of(out) : Edge{};
    STRATA_CHECK(start.node != nullptr, InvalidArgumentError,
                 "grad: output {} does not require grad and has no grad_fn", i);
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      STRATA_CHECK(out.numel() == 1, ShapeError,
                   "grad: grad_outputs may be left out only for one-element outputs; output {} has shape {}", i,
                   out.shape());
      g = ones(out.shape(), TensorOptions(out.dtype()).device(out.device()));
    }
    STRATA_CHECK(g.shape() == out.shape() && g.dtype() == out.dtype(), ShapeError,
                 "grad: grad_outputs[{}] is {} {}, but output {} is {} {}", i, g.shape(), g.dtype(), i, out.shape(),
                 out.dtype());
    roots.push_back({start.node, g});
  }
  // The inputs' nodes, held for the pass: a leaf holds its accumulator only weakly.
  std::vector<Edge> targets;
  std::unordered_map<Node*, Tensor> captured;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    STRATA_CHECK(inputs[i].defined() && inputs[i].requires_grad(), InvalidArgumentError,
                 "grad: input {} does not require grad", i);
    targets.push_back(edge_of(inputs[i]));
    captured.emplace(targets.back().node.get(), Tensor());
  }
  execute(roots, retain_graph, &captured);
  std::vector<Tensor> result;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    Tensor g = captured[targets[i].node.get()];
    STRATA_CHECK(g.defined() || allow_unused, InvalidArgumentError,
                 "grad: input {} was not used to compute the outputs (pass allow_unused=True to get None for it)", i);
    result.push_back(std::move(g));
  }
  return result;
}

void retain_grad(const Tensor& t) {
  auto& meta = meta_of(t);
  STRATA_CHECK(meta && meta->requires_grad, InvalidArgumentError,
               "retain_grad: the tensor does not require grad, so no gradient will reach it");
  if (!meta->grad_fn || meta->retains_grad) return;  // a leaf keeps its gradient anyway
  meta->retains_grad = true;
  // Weakly: the hook lives in the node that the tensor's own meta holds.
  meta->grad_fn->pre_hooks.push_back([weak = std::weak_ptr<AutogradMeta>(meta)](const Tensor& g) {
    if (auto held = weak.lock()) {
      std::lock_guard<std::mutex> lock(held->mutex);
      held->grad = held->grad.defined() ? add(held->grad, g) : g.clone();
    }
    return Tensor();
  });
}

bool retains_grad(const Tensor& t) {
  const auto& meta = meta_of(t);
  return meta && (meta->retains_grad || (meta->requires_grad && !meta->grad_fn));
}

}  // namespace autograd

// --- Tensor's autograd members (declared in tensor/tensor.h) ---

bool Tensor::requires_grad() const {
  const auto& meta = meta_of(*this);
  return meta && meta->requires_grad;
}

Tensor& Tensor::requires_grad_(bool enable) {
  auto& meta = meta_of(*this);
  if (meta && meta->grad_fn && !enable) {
    STRATA_THROW(InvalidArgumentError,
                 "requires_grad_(false): only leaf tensors can stop requiring grad; use detach() on the result of {}",
                 meta->grad_fn->name);
  }
  if (enable) {
    STRATA_CHECK(is_floating(dtype()), DTypeError, "requires_grad_: only floating-point tensors can require grad, "
                 "not {}", dtype());
  }
  if (!meta) meta = std::make_shared<AutogradMeta>();
  meta->requires_grad = enable;
  return *this;
}

Tensor Tensor::grad() const {
  const auto& meta = meta_of(*this);
  if (!meta) return Tensor();
  std::lock_guard<std::mutex> lock(meta->mutex);
  return meta->grad;
}

void Tensor::set_grad(const Tensor& grad) {
  // An optimizer would otherwise broadcast a wrong shape into the parameter, or fail later on the dtype.
  if (grad.defined()) {
    STRATA_CHECK(grad.shape() == shape() && grad.dtype() == dtype() && grad.device() == device(), InvalidArgumentError,
                 "set_grad: the gradient ({} {} on {}) must match the tensor ({} {} on {})", grad.shape(), grad.dtype(),
                 grad.device(), shape(), dtype(), device());
  }
  auto& meta = meta_of(*this);
  if (!meta) meta = std::make_shared<AutogradMeta>();
  std::lock_guard<std::mutex> lock(meta->mutex);
  meta->grad = grad;
}

bool Tensor::is_leaf() const {
  const auto& meta = meta_of(*this);
  return !meta || !meta->grad_fn;
}

std::string Tensor::grad_fn_name() const {
  const auto& meta = meta_of(*this);
  return meta && meta->grad_fn ? meta->grad_fn->name : std::string();
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  Tensor grad = gradient;
  if (!grad.defined()) {
    STRATA_CHECK(numel() == 1, ShapeError,
                 "backward: the gradient can be left out only for a one-element tensor (a loss); this one has shape "
                 "{}, so pass the gradient explicitly",
                 shape());
    grad = ones(shape(), TensorOptions(dtype()).device(device()));
  }
  STRATA_CHECK(grad.shape() == shape(), ShapeError, "backward: gradient shape {} does not match the tensor's {}",
               grad.shape(), shape());
  STRATA_CHECK(grad.dtype() == dtype(), DTypeError, "backward: the gradient is {} but the tensor is {}", grad.dtype(),
               dtype());
  autograd::run_backward(*this, grad, retain_graph);
}

Tensor Tensor::detach() const {
  Tensor out(storage(), dtype(), shape(), strides(), offset());
  return out;
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor& grad)> hook) {
  auto& meta = meta_of(*this);
  STRATA_CHECK(meta && meta->requires_grad && !meta->grad_fn, InvalidArgumentError,
               "register_post_accumulate_grad_hook: only a leaf that requires grad accumulates a gradient");
  meta->post_accumulate_hooks.push_back(std::move(hook));
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) {
  auto& meta = meta_of(*this);
  STRATA_CHECK(meta && meta->requires_grad, InvalidArgumentError,
               "register_hook: the tensor does not require grad, so no gradient will reach the hook");
  if (meta->grad_fn) {
    meta->grad_fn->pre_hooks.push_back(std::move(hook));
  } else {
    meta->hooks.push_back(std::move(hook));
  }
}

}  // namespace strata
