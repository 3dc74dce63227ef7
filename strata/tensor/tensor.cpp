#include "strata/tensor/tensor.h"

#include "strata/core/error.h"
#include "strata/ops/checks.h"

namespace strata {

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Strides strides, int64_t offset)
    : storage_(std::move(storage)),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset) {}

int64_t wrap_dim(int64_t d, int64_t dim, const char* op) { return ops::wrap_dim(op, d, dim); }

int64_t Tensor::size(int64_t d) const { return shape_[static_cast<std::size_t>(wrap_dim(d, dim(), "size"))]; }

int64_t Tensor::stride(int64_t d) const {
  return strides_[static_cast<std::size_t>(wrap_dim(d, dim(), "stride"))];
}

bool Tensor::is_contiguous() const { return view().is_contiguous(); }

void* Tensor::data_ptr() const {
  STRATA_CHECK(defined(), InvalidArgumentError, "data_ptr: the tensor is undefined");
  return static_cast<char*>(storage_->data.get()) + offset_ * static_cast<int64_t>(element_size());
}

TensorView Tensor::view() const {
  return {storage_ ? storage_->data.get() : nullptr, dtype_, device(), shape_, strides_, offset_};
}

}  // namespace strata
