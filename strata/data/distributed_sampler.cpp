#include "strata/data/distributed_sampler.h"

#include "strata/core/error.h"
#include "strata/data/sampling.h"

namespace strata::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int world_size, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : dataset_size_(dataset_size),
      world_size_(world_size),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  STRATA_CHECK(dataset_size >= 0, InvalidArgumentError, "DistributedSampler: the dataset size {} is negative",
               dataset_size);
  STRATA_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, InvalidArgumentError,
               "DistributedSampler: rank {} is not a rank of a world of {}", rank, world_size);
}

int64_t DistributedSampler::size() const {
  return drop_last_ ? dataset_size_ / world_size_ : (dataset_size_ + world_size_ - 1) / world_size_;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order;
  if (shuffle_) {
    order = permutation(dataset_size_, seed_, epoch_);
  } else {
    order.resize(static_cast<std::size_t>(dataset_size_));
    for (int64_t i = 0; i < dataset_size_; ++i) order[static_cast<std::size_t>(i)] = i;
  }
  // Note [Sharding a dataset over ranks]: pad with the order's own beginning, or drop the tail.
  const auto total = static_cast<std::size_t>(size() * world_size_);
  for (std::size_t i = 0; order.size() < total; ++i) order.push_back(order[i % static_cast<std::size_t>(dataset_size_)]);
  order.resize(total);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<std::size_t>(size()));
  for (std::size_t i = static_cast<std::size_t>(rank_); i < total; i += static_cast<std::size_t>(world_size_)) {
    mine.push_back(order[i]);
  }
  return mine;
}

}  // namespace strata::data
