#include "strata/tensor/tensor.h"

#include "strata/core/error.h"
#include "strata/ops/checks.h"
#include "strata/runtime/thread_cache.h"

namespace strata {

const Shape Tensor::kNoShape{};
const std::shared_ptr<Storage> Tensor::kNoStorage{};

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Strides strides, int64_t offset)
    : impl_(std::allocate_shared<TensorImpl>(ThreadCacheAllocator<TensorImpl>(), std::move(storage), dtype,
                                             std::move(shape), std::move(strides), offset)) {
  // A view of an undefined tensor (which has no storage) arrives here from every view op.
  STRATA_CHECK(impl_->storage != nullptr, InvalidArgumentError,
               "cannot take a view of an undefined tensor (a default-constructed Tensor has no data)");
}

int64_t wrap_dim(int64_t d, int64_t dim, const char* op) { return ops::wrap_dim(op, d, dim); }

int64_t Tensor::size(int64_t d) const {
  STRATA_CHECK(dim() > 0, IndexError, "size: a 0-dimensional tensor has no dimension {}", d);
  return shape()[static_cast<std::size_t>(wrap_dim(d, dim(), "size"))];
}

int64_t Tensor::stride(int64_t d) const {
  STRATA_CHECK(dim() > 0, IndexError, "stride: a 0-dimensional tensor has no dimension {}", d);
  return strides()[static_cast<std::size_t>(wrap_dim(d, dim(), "stride"))];
}

bool Tensor::is_contiguous() const { return view().is_contiguous(); }

void Tensor::check_data_type(DType wanted, bool reads_bytes) const {
  STRATA_CHECK(wanted == dtype() || (reads_bytes && dtype() == DType::Bool) || !defined(), DTypeError,
               "data<T>(): the tensor holds {} but T is the type of {}", dtype(), wanted);
}

void* Tensor::data_ptr() const {
  STRATA_CHECK(defined(), InvalidArgumentError, "data_ptr: the tensor is undefined");
  return static_cast<char*>(impl_->storage->data.get()) + impl_->offset * static_cast<int64_t>(element_size());
}

TensorView Tensor::view() const {
  if (!impl_) return {};
  return {impl_->storage->data.get(), impl_->dtype, impl_->storage->device, impl_->shape, impl_->strides,
          impl_->offset};
}

std::shared_ptr<AutogradMeta>& Tensor::autograd_meta() const {
  STRATA_CHECK(defined(), InvalidArgumentError, "autograd: the tensor is undefined");
  return impl_->autograd;
}

void Tensor::set_data(const Tensor& other) {
  STRATA_CHECK(defined() && other.defined(), InvalidArgumentError, "set_data: both tensors must be defined");
  impl_->storage = other.impl_->storage;
  impl_->dtype = other.impl_->dtype;
  impl_->shape = other.impl_->shape;
  impl_->strides = other.impl_->strides;
  impl_->offset = other.impl_->offset;
}

}  // namespace strata
