#include "strata/ops/checks.h"

#include <algorithm>

#include "strata/core/error.h"

namespace strata::ops {

void check_same_device(const char* op, std::initializer_list<const TensorView*> args) {
  const TensorView* first = *args.begin();
  int position = 0;
  for (const TensorView* arg : args) {
    STRATA_CHECK(arg->device == first->device, DeviceMismatchError,
                 "{}: argument 0 is on {} but argument {} is on {}; Strata does not copy between devices "
                 "implicitly: move one of them with .to(device)",
                 op, first->device, position, arg->device);
    ++position;
  }
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const auto n = std::max(a.ssize(), b.ssize());
  Shape out(static_cast<std::size_t>(n), 1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.ssize() ? 1 : a[i - (n - a.ssize())];
    const int64_t db = i < n - b.ssize() ? 1 : b[i - (n - b.ssize())];
    STRATA_CHECK(da == db || da == 1 || db == 1, ShapeError,
                 "{}: shapes {} and {} cannot be broadcast together (dimension {}: {} vs {})", op, a, b, i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

TensorView broadcast_to(const char* op, const TensorView& v, const Shape& shape) {
  STRATA_CHECK(v.shape.ssize() <= shape.ssize(), ShapeError, "{}: cannot broadcast shape {} to {}", op, v.shape,
               shape);
  TensorView out = v;
  const auto lead = shape.ssize() - v.shape.ssize();
  out.shape = shape;
  out.strides = Strides(shape.size(), 0);
  for (int64_t i = 0; i < v.shape.ssize(); ++i) {
    const int64_t have = v.shape[i];
    STRATA_CHECK(have == shape[lead + i] || have == 1, ShapeError, "{}: cannot broadcast shape {} to {}", op, v.shape,
                 shape);
    out.strides[lead + i] = have == 1 ? 0 : v.strides[i];
  }
  return out;
}

int64_t wrap_dim(const char* op, int64_t d, int64_t dim) {
  const int64_t n = std::max<int64_t>(dim, 1);  // a scalar accepts dims 0 and -1
  STRATA_CHECK(d >= -n && d < n, IndexError, "{}: dimension {} is out of range for a tensor with {} dimension(s)", op,
               d, dim);
  return d < 0 ? d + n : d;
}

std::vector<int64_t> reduction_dims(const char* op, const std::vector<int64_t>& dims, int64_t dim) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t i = 0; i < dim; ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(op, d, dim));
  std::sort(out.begin(), out.end());
  STRATA_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), InvalidArgumentError,
               "{}: dimension listed twice in {}", op, fmt::join(dims, ", "));
  return out;
}

}  // namespace strata::ops
