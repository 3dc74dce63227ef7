#pragma once

#include <cstdint>

#include "strata/core/device.h"
#include "strata/core/dtype.h"
#include "strata/core/shape.h"

namespace strata {

/// A non-owning description of strided data: what the op table and the backends see of a tensor. Strides and the
/// offset are in elements; `data` points at the storage's first byte (the view starts at data + offset).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device{};
  Shape shape;
  Strides strides;
  int64_t offset = 0;

  int64_t dim() const { return shape.ssize(); }
  int64_t numel() const { return strata::numel(shape); }
  bool is_contiguous() const {
    int64_t expected = 1;
    for (auto i = dim() - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != expected) return false;
      expected *= shape[i];
    }
    return true;
  }
  /// Typed pointer to the first element of the view.
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data) + offset;
  }
};

}  // namespace strata
