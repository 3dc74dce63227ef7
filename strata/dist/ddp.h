#pragma once

// Data-parallel training across ranks (PyTorch's DistributedDataParallel): every rank holds the whole model,
// trains on its own shard of each batch, and the gradients are averaged over the world during backward.

#include <cstddef>
#include <memory>
#include <vector>

#include "strata/autograd/hooks.h"
#include "strata/dist/process_group.h"
#include "strata/nn/module.h"

namespace strata::dist {

struct DdpOptions {
  /// Bytes of gradients per all-reduce (PyTorch's defaults): the first bucket is small so that communication
  /// starts early in backward, the others large so that there are few collectives.
  std::size_t bucket_cap_bytes = std::size_t{25} << 20;
  std::size_t first_bucket_cap_bytes = std::size_t{1} << 20;
  /// c10d's gradient_as_bucket_view: each parameter's grad() becomes a view into its bucket, so that backward
  /// accumulates straight into the buckets and the averages need no copy back (Note [Gradients as bucket views]).
  bool gradient_as_bucket_view = false;
};

// Note [Gradient buckets]
// Parameters go into buckets in reverse registration order (the order backward produces their gradients), the
// first up to first_bucket_cap_bytes, the others up to bucket_cap_bytes; a bucket holds one dtype on one device.
// Each parameter's post-accumulate hook counts its bucket down; when a bucket is complete its gradients are copied
// into one flat tensor and its all-reduce (Avg) starts on the group's communication thread while backward goes on.
// Buckets start in index order on every rank, whatever order their gradients arrive in, so that every rank issues
// the same collectives in the same order. At the end of backward (an autograd callback) the buckets whose
// parameters got no gradient in this pass start too, every all-reduce is waited for, and the averages are copied
// back into each parameter's grad(). The result does not depend on the buckets' sizes: each element is reduced
// once, by the same operation.
//
// Note [Parameters that a pass did not use]
// As c10d's reducer: a parameter that got no gradient on this rank since the last reduction contributes zeros, and
// the average (over the whole world) still reaches its grad() when another rank used it. One that no rank used
// keeps its grad() untouched (undefined stays undefined), so that momentum and weight decay see no gradient rather
// than a zero one. Which ranks used what rides along with the gradients: each bucket ends with one element per
// parameter, 1 where this rank used it and 0 elsewhere, averaged with the rest, so nonzero means "used somewhere".
// That costs a few elements per bucket and no collective of its own (c10d all-reduces a separate map when asked to
// find unused parameters). Usage accumulates over no_sync() passes, whose gradients the next synchronised pass
// reduces.
//
// Note [Gradients as bucket views]
// With gradient_as_bucket_view, a parameter's gradient is copied into its bucket once and grad() then made a view of
// that slot; later passes accumulate into the view in place (zero_grad(set_to_none=false) zeroes the slots), so
// nothing is copied in or out, and the gradients take no memory besides the buckets. With zero_grad's default
// (set_to_none) backward makes a fresh gradient each pass and the copy in remains, as in c10d. A slot whose
// parameter got no gradient is zeroed before its all-reduce; if that parameter's grad() was the slot it is first
// given a copy of its values, so that an unused parameter's gradient stays untouched. Measured in a world of one (the
// copies alone, no communication), an MLP of 1.9M f32 parameters (784-1024-1024-10), batch 64, one thread: a step
// with zero_grad(set_to_none=false) from 8.0-8.2 to 7.1-7.3 ms, with set_to_none from 7.4-7.5 to 7.0-7.1 ms (best of
// 6 x 7 rounds of 10 steps, interleaved). Two ranks on this shared 2-core machine showed no difference above the noise.

/// The gradient averaging of DistributedDataParallel over a list of parameters (c10d's Reducer): hooks on the
/// parameters start each bucket's all-reduce as backward completes it. Destroying it removes its hooks.
class GradientReducer {
 public:
  /// `parameters` are leaves that require grad, on this rank's device; the group must outlive the reducer.
  GradientReducer(std::vector<Tensor> parameters, ProcessGroup& group, const DdpOptions& options = {});
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Buckets as indices into the parameters, in the order they are reduced.
  std::vector<std::vector<std::size_t>> bucket_layout() const;
  /// Off: backward accumulates gradients locally (no_sync); the next backward with it on reduces what accumulated.
  void set_sync(bool on) { sync_ = on; }
  bool sync() const { return sync_; }
  /// Seconds the last backward waited at its end for all-reduces (the part of communication not hidden behind
  /// backward), for the benchmarks.
  double last_wait_seconds() const { return last_wait_seconds_; }

 private:
  struct Bucket;
  void on_gradient(std::size_t parameter);
  void start_ready_buckets();
  void start(Bucket& bucket);
  void finish_backward();

  ProcessGroup& group_;
  bool as_view_;
  std::vector<Tensor> parameters_;
  std::vector<autograd::RemovableHandle> hooks_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::size_t> bucket_of_;  // by parameter index
  std::vector<char> used_;              // by parameter index: got a gradient since the last reduction
  std::vector<char> ready_;             // by parameter index: got its gradient in the pass in progress
  std::size_t next_bucket_ = 0;         // the next bucket to start, in order
  bool in_pass_ = false;
  uint64_t pass_ = 0;  // autograd::backward_pass_id() of the pass in progress
  bool sync_ = true;
  double last_wait_seconds_ = 0;
};

/// Wraps a module whose parameters are already on this rank's device. Parameters and buffers are broadcast from rank
/// 0 when it is built, so every rank starts from rank 0's model. Destroying the wrapper takes its hooks off the
/// parameters: the module then trains alone again, or under a new wrapper.
class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& group, DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  nn::Module& module() { return *module_; }
  ProcessGroup& group() { return group_; }
  /// Runs the module (PyTorch's ddp(x)): it must be a layer with one input (nn::Layer); InvalidArgumentError
  /// otherwise.
  Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }
  /// Buckets as parameter indices into module().parameters(), in the order they are reduced.
  std::vector<std::vector<std::size_t>> bucket_layout() const;

  /// While the guard lives, backward accumulates gradients locally without reducing them (gradient accumulation);
  /// the first backward after it reduces what has accumulated.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : reducer_(*ddp.reducer_), previous_(reducer_.sync()) {
      reducer_.set_sync(false);
    }
    ~NoSync() { reducer_.set_sync(previous_); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    GradientReducer& reducer_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(*this); }

  /// Seconds the last backward waited at its end for all-reduces (the part of communication not hidden behind
  /// backward), for the benchmarks.
  double last_wait_seconds() const { return reducer_->last_wait_seconds(); }

 private:
  std::shared_ptr<nn::Module> module_;
  ProcessGroup& group_;
  std::vector<std::size_t> trained_;  // indices into module_->parameters() of those that require grad
  std::unique_ptr<GradientReducer> reducer_;
};

}  // namespace strata::dist
