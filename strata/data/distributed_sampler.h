#pragma once

#include <cstdint>
#include <vector>

namespace strata::data {

// Note [Sharding a dataset over ranks]
// Every rank draws the same permutation of the whole dataset from (seed, epoch) (Note [Reproducible shuffling]) and
// takes every world-size-th index from its rank on, as PyTorch's DistributedSampler does, so the ranks' shards are
// disjoint and together cover the epoch. When the dataset does not divide evenly, the permutation is padded with its
// own first indices up to a multiple of the world size (PyTorch's default): every rank then runs the same number of
// steps, which the collectives of each step need, and a few examples count twice in that epoch. drop_last instead
// leaves out the last (size mod world) indices of the permutation.

/// The indices of one rank's shard of a dataset, epoch by epoch.
class DistributedSampler {
 public:
  /// Throws InvalidArgumentError for a negative size, a world size below 1 or a rank outside [0, world_size).
  DistributedSampler(int64_t dataset_size, int world_size, int rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);

  /// The next indices() are those of `epoch`: a new order each epoch when shuffling.
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  uint64_t epoch() const { return epoch_; }
  /// This rank's indices for the current epoch, in the order to visit them.
  std::vector<int64_t> indices() const;
  /// How many indices each rank gets per epoch.
  int64_t size() const;

 private:
  int64_t dataset_size_;
  int world_size_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  uint64_t epoch_ = 0;
};

}  // namespace strata::data
