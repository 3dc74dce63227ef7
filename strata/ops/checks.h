#pragma once

#include <initializer_list>
#include <vector>

#include "strata/core/shape.h"
#include "strata/core/tensor_view.h"

namespace strata::ops {

/// Throws DeviceMismatchError naming the op, the first two argument positions that differ and their devices.
void check_same_device(const char* op, std::initializer_list<const TensorView*> args);
/// The broadcast of two shapes (numpy rules); ShapeError naming the op and both shapes otherwise.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
/// A view of `v` with the shape `shape` it broadcasts to (stride 0 on broadcast dims).
TensorView broadcast_to(const char* op, const TensorView& v, const Shape& shape);
/// Wraps a negative dim and checks it; IndexError naming the op otherwise.
int64_t wrap_dim(const char* op, int64_t d, int64_t dim);
/// Sorted, unique, wrapped dims; all dims when `dims` is empty.
std::vector<int64_t> reduction_dims(const char* op, const std::vector<int64_t>& dims, int64_t dim);

}  // namespace strata::ops
