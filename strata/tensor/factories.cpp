#include "strata/tensor/factories.h"

#include <cstring>

#include "strata/core/error.h"
#include "strata/runtime/pinned.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/thread_cache.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/op_call.h"
#include "strata/tensor/op_checks.h"

namespace strata {

namespace {
const ops::KernelSlot<ops::FillFn> fill_slot("fill");
}

Tensor empty(const Shape& shape, TensorOptions options) {
  for (int64_t d : shape) {
    STRATA_CHECK(d >= 0, ShapeError, "empty: negative dimension {} in shape {}", d, shape);
  }
  const Device device = resolve(options.device_);
  STRATA_CHECK(!options.pinned_ || device.is_cpu(), InvalidArgumentError,
               "empty: only CPU tensors can be pinned, not tensors on {}", device);
  const auto elem = static_cast<int64_t>(dtype_size(options.dtype_));
  STRATA_CHECK(checked_span(shape, elem).has_value(), ShapeError,
               "empty: shape {} of {} is too large: its size in bytes does not fit in 64 bits", shape, options.dtype_);
  const std::size_t nbytes = static_cast<std::size_t>(numel(shape)) * dtype_size(options.dtype_);
  DataPtr data = options.pinned_ ? allocate_pinned(nbytes) : allocate(device, nbytes);
  // Note [Small objects are recycled per thread]
  auto storage =
      std::allocate_shared<Storage>(ThreadCacheAllocator<Storage>(), std::move(data), nbytes, device, options.pinned_);
  return Tensor(std::move(storage), options.dtype_, shape, contiguous_strides(shape), 0);
}

Tensor full(const Shape& shape, const Scalar& value, TensorOptions options) {
  Tensor t = empty(shape, options);
  t.fill_(value);
  return t;
}

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1, options); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), TensorOptions(t.dtype()).device(t.device())); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), TensorOptions(t.dtype()).device(t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), TensorOptions(t.dtype()).device(t.device())); }

Tensor scalar_tensor(const Scalar& value, TensorOptions options) { return full({}, value, options); }

void detail::check_value_count(const char* op, std::size_t count, const Shape& shape) {
  for (int64_t d : shape) STRATA_CHECK(d >= 0, ShapeError, "{}: negative dimension {} in shape {}", op, d, shape);
  STRATA_CHECK(checked_span(shape).has_value() && static_cast<uint64_t>(numel(shape)) == count, ShapeError,
               "{}: {} values do not fill shape {}", op, count, shape);
}

Tensor from_blob(const void* data, const Shape& shape, DType dtype, Device device) {
  Tensor host = empty(shape, dtype);
  STRATA_CHECK(data != nullptr || host.storage()->nbytes == 0, InvalidArgumentError,
               "from_blob: data is null for shape {} of {}", shape, dtype);
  // An empty std::vector's data() may be null; memcpy must not see it even for zero bytes.
  if (host.storage()->nbytes != 0) std::memcpy(host.data_ptr(), data, host.storage()->nbytes);
  return host.to(device);
}

namespace {

// As PyTorch: a value an integer tensor cannot hold is an error, not a wrapped or undefined number.
void check_fits(const char* op, const Scalar& value, DType dtype) {
  if (is_floating(dtype) || dtype == DType::Bool) return;  // they take any value
  const auto [low, high] = detail::integral_range(dtype);
  const bool fits = value.is_floating() ? value.to_double() >= static_cast<double>(low) &&
                                              value.to_double() < static_cast<double>(high) + 1.0
                                        : value.to_int() >= low && value.to_int() <= high;
  STRATA_CHECK(fits, InvalidArgumentError, "{}: value {} cannot be converted to {} without overflow", op,
               value.is_floating() ? fmt::format("{}", value.to_double()) : fmt::format("{}", value.to_int()), dtype);
}

}  // namespace

Tensor& Tensor::fill_(const Scalar& value) {
  STRATA_CHECK(defined(), InvalidArgumentError, "fill_: the tensor is undefined");
  check_fits("fill_", value, dtype());
  if (detail::records_in_place("fill_", *this, {})) {
    return detail::rebase_history("fill_", *this, full(shape(), value, TensorOptions(dtype()).device(device())));
  }
  if (numel() == 0) return *this;
  bump_version();
  fill_slot.get(device())(detail::op_call("fill", device()), view(), value);
  return *this;
}

}  // namespace strata
