#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::data {

// Note [Batch transforms]
// Transforms take a whole batch, f32 in host memory, shaped [N, C, H, W] or [N, H, W] (one channel), and run in the
// DataLoader's thread on the CPU with plain loops. They may work in place: the loader hands each one a batch it owns.
// Random transforms keep their own generator, seeded at construction, so a run is reproducible; the loader calls
// them on one batch at a time: an iteration's batches in order, from its thread, and with several iterations at
// once (DataLoader's iterations are independent) one call after another.

/// A batch transform (see Note [Batch transforms]).
using Transform = std::function<Tensor(Tensor)>;

/// Applies transforms one after the other.
class Compose {
 public:
  explicit Compose(std::vector<Transform> transforms) : transforms_(std::move(transforms)) {}
  Tensor operator()(Tensor batch);

 private:
  std::vector<Transform> transforms_;
};

/// (x - mean[c]) / std[c] per channel, in place; one value applies to every channel.
class Normalize {
 public:
  Normalize(std::vector<float> mean, std::vector<float> std);
  Tensor operator()(Tensor batch) const;

 private:
  std::vector<float> mean_;
  std::vector<float> std_;
};

/// Mirrors each image left-right with probability p, in place.
class RandomHorizontalFlip {
 public:
  explicit RandomHorizontalFlip(double p = 0.5, uint64_t seed = 0);
  Tensor operator()(Tensor batch);

 private:
  double p_;
  std::mt19937_64 rng_;
};

/// Pads each image with `padding` zeros on every side, then cuts a size x size window at a random place (a new
/// batch [N, (C,) size, size], pinned when the input is).
class RandomCrop {
 public:
  explicit RandomCrop(int64_t size, int64_t padding = 0, uint64_t seed = 0);
  Tensor operator()(Tensor batch);

 private:
  int64_t size_;
  int64_t padding_;
  std::mt19937_64 rng_;
};

}  // namespace strata::data
