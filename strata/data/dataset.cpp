#include "strata/data/dataset.h"

#include <cstring>
#include <vector>

#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::data {

namespace {

void check_indices(const char* op, const Tensor& indices) {
  STRATA_CHECK(indices.defined() && indices.dim() == 1 && indices.dtype() == DType::I64 && indices.device().is_cpu(),
               InvalidArgumentError, "{}: indices must be a 1-D i64 CPU tensor", op);
}

// Note [Gathering batches on the host]
// A batch of a dataset held in contiguous host memory is gathered here with one memcpy per example, on the calling
// thread (the DataLoader's). index_select would do the same work on the OpenMP pool, element by element, where it
// would compete with the training step for the pool's threads; datasets on a device, or not contiguous, use it.
Tensor gather_rows(const Tensor& t, const int64_t* idx, int64_t count) {
  if (!t.device().is_cpu() || !t.is_contiguous()) {
    return index_select(t, 0, from_blob(idx, {count}, DType::I64).to(t.device()));
  }
  Shape shape = t.shape();
  shape[0] = count;
  Tensor out = empty(shape, t.dtype());
  const std::size_t row = static_cast<std::size_t>(t.size(0) > 0 ? t.numel() / t.size(0) : 0) * t.element_size();
  const auto* src = static_cast<const char*>(t.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  for (int64_t i = 0; i < count; ++i) std::memcpy(dst + i * row, src + idx[i] * row, row);
  return out;
}

}  // namespace

Example Dataset::get_batch(const Tensor& indices) const {
  check_indices("Dataset::get_batch", indices);
  STRATA_CHECK(indices.numel() > 0, InvalidArgumentError, "Dataset::get_batch: no indices");
  std::vector<Tensor> data;
  std::vector<Tensor> target;
  data.reserve(static_cast<std::size_t>(indices.numel()));
  target.reserve(static_cast<std::size_t>(indices.numel()));
  for (int64_t i : indices.to_vector<int64_t>()) {
    Example e = get(i);
    data.push_back(std::move(e.data));
    target.push_back(std::move(e.target));
  }
  return {stack(data), stack(target)};
}

TensorDataset::TensorDataset(Tensor data, Tensor target) : data_(std::move(data)), target_(std::move(target)) {
  STRATA_CHECK(data_.defined() && target_.defined(), ShapeError, "TensorDataset: data and target must be defined");
  STRATA_CHECK(data_.dim() >= 1 && target_.dim() >= 1 && data_.size(0) == target_.size(0), ShapeError,
               "TensorDataset: data and target must have the same first dimension, got shapes {} and {}", data_.shape(),
               target_.shape());
  STRATA_CHECK(data_.device() == target_.device(), InvalidArgumentError,
               "TensorDataset: data is on {} but target is on {}", data_.device(), target_.device());
}

Example TensorDataset::get(int64_t index) const {
  STRATA_CHECK(index >= 0 && index < size(), IndexError, "TensorDataset::get: index {} is out of range [0, {})", index,
               size());
  return {data_.select(0, index), target_.select(0, index)};
}

Example TensorDataset::get_batch(const Tensor& indices) const {
  check_indices("TensorDataset::get_batch", indices);
  // Checked here on the host: index_select would report a bad index only as a device-side assert.
  const Tensor dense = indices.contiguous();
  const auto* idx = dense.data<int64_t>();
  for (int64_t i = 0; i < indices.numel(); ++i) {
    STRATA_CHECK(idx[i] >= 0 && idx[i] < size(), IndexError,
                 "TensorDataset::get_batch: index {} (position {}) is out of range [0, {})", idx[i], i, size());
  }
  return {gather_rows(data_, idx, indices.numel()), gather_rows(target_, idx, indices.numel())};
}

Subset::Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  STRATA_CHECK(dataset_ != nullptr, InvalidArgumentError, "Subset: the dataset is null");
  for (std::size_t i = 0; i < indices_.size(); ++i) {
    STRATA_CHECK(indices_[i] >= 0 && indices_[i] < dataset_->size(), IndexError,
                 "Subset: index {} (position {}) is out of range [0, {})", indices_[i], i, dataset_->size());
  }
}

Example Subset::get(int64_t index) const {
  STRATA_CHECK(index >= 0 && index < size(), IndexError, "Subset::get: index {} is out of range [0, {})", index, size());
  return dataset_->get(indices_[static_cast<std::size_t>(index)]);
}

Example Subset::get_batch(const Tensor& indices) const {
  check_indices("Subset::get_batch", indices);
  const Tensor dense = indices.contiguous();
  const auto* idx = dense.data<int64_t>();
  std::vector<int64_t> mapped(static_cast<std::size_t>(indices.numel()));
  for (int64_t i = 0; i < indices.numel(); ++i) {
    STRATA_CHECK(idx[i] >= 0 && idx[i] < size(), IndexError,
                 "Subset::get_batch: index {} (position {}) is out of range [0, {})", idx[i], i, size());
    mapped[static_cast<std::size_t>(i)] = indices_[static_cast<std::size_t>(idx[i])];
  }
  return dataset_->get_batch(tensor(mapped));
}

}  // namespace strata::data
