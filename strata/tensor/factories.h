#pragma once

#include <cstdint>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata {

/// dtype and device of a new tensor: `zeros({2, 3}, TensorOptions().device("cuda").dtype(DType::F16))`.
struct TensorOptions {
  DType dtype_ = DType::F32;
  Device device_ = kCPU;
  bool pinned_ = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}      // NOLINT: `zeros(shape, DType::I64)` reads well
  TensorOptions(Device d) : device_(d) {}    // NOLINT: `zeros(shape, Device("cuda"))`
  TensorOptions(const char* d) : device_(d) {}  // NOLINT: `zeros(shape, "cuda:0")`
  TensorOptions& dtype(DType d) { dtype_ = d; return *this; }
  TensorOptions& device(Device d) { device_ = d; return *this; }
  /// Page-locked host memory (CPU tensors only) for asynchronous copies to a GPU.
  TensorOptions& pinned(bool p = true) { pinned_ = p; return *this; }
};

/// Uninitialised memory.
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, const Scalar& value, TensorOptions options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);

/// Values start, start+step, ... below end (as numpy.arange); dtype i64 unless options say otherwise.
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, TensorOptions options = DType::I64);
Tensor arange(const Scalar& end, TensorOptions options = DType::I64);
/// `steps` values evenly spaced from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
/// Identity matrix n x m (m defaults to n).
Tensor eye(int64_t n, int64_t m = -1, TensorOptions options = {});

/// Uniform in [0, 1), from the device's generator. The same seed gives the same numbers on every device.
Tensor rand(const Shape& shape, TensorOptions options = {});
/// Standard normal.
Tensor randn(const Shape& shape, TensorOptions options = {});
/// Integers uniform in [low, high); dtype i64 unless options say otherwise.
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = DType::I64);
/// Seeds the generators of every device.
void manual_seed(uint64_t seed);

namespace detail {
/// Throws ShapeError naming `op` unless `count` values fill `shape` exactly.
void check_value_count(const char* op, std::size_t count, const Shape& shape);
}  // namespace detail

/// Copies a host buffer of `shape` (values of `dtype`) into a new tensor on options.device.
Tensor from_blob(const void* data, const Shape& shape, DType dtype, Device device = kCPU);

/// A tensor holding `values` with `shape` (1-D when shape is empty), dtype from T.
template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape = {}, Device device = kCPU) {
  Shape s = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape;
  detail::check_value_count("tensor", values.size(), s);
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<std::uint8_t> bytes(values.begin(), values.end());
    return from_blob(bytes.data(), s, DType::Bool, device);
  } else {
    return from_blob(values.data(), s, dtype_of<T>, device);
  }
}
template <typename T>
Tensor tensor(std::initializer_list<T> values, const Shape& shape = {}, Device device = kCPU) {
  return tensor(std::vector<T>(values), shape, device);
}
/// A zero-dimensional tensor holding one value.
Tensor scalar_tensor(const Scalar& value, TensorOptions options = {});

}  // namespace strata
