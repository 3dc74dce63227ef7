#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::data {

/// One example, or a batch of them stacked along a new first dimension.
struct Example {
  Tensor data;
  Tensor target;
};

/// A random-access collection of examples. `get` and `get_batch` are const and are called from the DataLoader's
/// background thread, so a dataset must not change while a loader iterates over it.
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Number of examples.
  virtual int64_t size() const = 0;
  /// The example at `index` in [0, size()).
  virtual Example get(int64_t index) const = 0;
  /// The examples at `indices` (1-D i64 on the CPU), stacked along a new first dimension. The DataLoader calls
  /// this; the default stacks `get(i)`, datasets held in memory override it with one gather.
  virtual Example get_batch(const Tensor& indices) const;
};

/// Examples held as two tensors whose first dimension indexes the example: data[i] and target[i].
class TensorDataset : public Dataset {
 public:
  /// Throws ShapeError unless both are defined, at least 1-D and equally long, and InvalidArgumentError unless both
  /// live on one device.
  TensorDataset(Tensor data, Tensor target);

  int64_t size() const override { return data_.size(0); }
  Example get(int64_t index) const override;
  /// One gather per tensor (see Note [Gathering batches on the host]).
  Example get_batch(const Tensor& indices) const override;

  const Tensor& data() const { return data_; }
  const Tensor& target() const { return target_; }

 private:
  Tensor data_;
  Tensor target_;
};

/// The examples of another dataset at `indices`, in that order (PyTorch's Subset): a rank's shard of an epoch
/// (DistributedSampler), a held-out split.
class Subset : public Dataset {
 public:
  /// Throws InvalidArgumentError for a null dataset and IndexError for an index outside it.
  Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices);

  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override;
  /// One get_batch of the underlying dataset.
  Example get_batch(const Tensor& indices) const override;

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::vector<int64_t> indices_;
};

}  // namespace strata::data
