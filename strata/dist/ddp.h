#pragma once

// Data-parallel training across ranks (PyTorch's DistributedDataParallel): every rank holds the whole model,
// trains on its own shard of each batch, and the gradients are averaged over the world during backward.

#include <cstddef>
#include <memory>
#include <vector>

#include "strata/dist/process_group.h"
#include "strata/nn/module.h"

namespace strata::dist {

struct DdpOptions {
  /// Bytes of gradients per all-reduce (PyTorch's defaults): the first bucket is small so that communication
  /// starts early in backward, the others large so that there are few collectives.
  std::size_t bucket_cap_bytes = std::size_t{25} << 20;
  std::size_t first_bucket_cap_bytes = std::size_t{1} << 20;
};

// Note [Gradient buckets]
// Parameters go into buckets in reverse registration order (the order backward produces their gradients), the
// first up to first_bucket_cap_bytes, the others up to bucket_cap_bytes; a bucket holds one dtype on one device.
// Each parameter's post-accumulate hook counts its bucket down; when a bucket is complete its gradients are copied
// into one flat tensor and its all-reduce (Avg) starts on the group's communication thread while backward goes on.
// Buckets start in index order on every rank, whatever order their gradients arrive in, so that every rank issues
// the same collectives in the same order. At the end of backward (an autograd callback) the buckets whose
// parameters got no gradient in this pass start too (with zeros for those), every all-reduce is waited for, and the
// averages are copied back into each parameter's grad(). The result does not depend on the buckets' sizes: each
// element is reduced once, by the same operation.

/// Wraps a module whose parameters are already on this rank's device. Parameters and buffers are broadcast from rank
/// 0 when it is built, so every rank starts from rank 0's model.
class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& group, DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  nn::Module& module() { return *module_; }
  ProcessGroup& group() { return group_; }
  /// Buckets as parameter indices into module().parameters(), in the order they are reduced.
  std::vector<std::vector<std::size_t>> bucket_layout() const;

  /// While the guard lives, backward accumulates gradients locally without reducing them (gradient accumulation);
  /// the first backward after it reduces what has accumulated.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.sync_) { ddp_.sync_ = false; }
    ~NoSync() { ddp_.sync_ = previous_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(*this); }

  /// Seconds the last backward waited at its end for all-reduces (the part of communication not hidden behind
  /// backward), and seconds from a bucket's start to its completion summed over buckets, for the benchmarks.
  double last_wait_seconds() const { return last_wait_seconds_; }

 private:
  struct Bucket;
  void on_gradient(std::size_t parameter);
  void start_ready_buckets();
  void start(Bucket& bucket);
  void finish_backward();

  std::shared_ptr<nn::Module> module_;
  ProcessGroup& group_;
  std::vector<Tensor> parameters_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::size_t> bucket_of_;  // by parameter index
  std::vector<Tensor> ready_grads_;     // by parameter index: this pass's accumulated gradient, or undefined
  std::size_t next_bucket_ = 0;         // the next bucket to start, in order
  bool in_pass_ = false;
  uint64_t pass_ = 0;                   // autograd::backward_pass_id() of the pass in progress
  bool sync_ = true;
  double last_wait_seconds_ = 0;
};

}  // namespace strata::dist
