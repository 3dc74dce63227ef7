// Views share their base's storage and differ only in shape, strides and offset; cat and stack build on them.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/ops/checks.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_checks.h"

namespace strata {

namespace {

std::string strides_str(const Strides& strides) { return fmt::format("[{}]", fmt::join(strides, ", ")); }

// Wraps the position of a new dimension: one of dim + 1 places, negative counting from the end.
int64_t wrap_new_dim(const char* op, int64_t d, int64_t dim) {
  STRATA_CHECK(d >= -(dim + 1) && d <= dim, IndexError,
               "{}: position {} is out of range for a new dimension of a tensor with {} dimension(s) (valid: {} to {})",
               op, d, dim, -(dim + 1), dim);
  return d < 0 ? d + dim + 1 : d;
}

void check_has_dims(const Tensor& t, const char* op) {
  STRATA_CHECK(t.dim() > 0, IndexError, "{}: cannot be applied to a 0-dimensional tensor", op);
}

/// Replaces a single -1 by the size that makes the element count `numel`.
Shape infer_size(const char* op, const Shape& shape, int64_t numel) {
  Shape out = shape;
  std::optional<std::size_t> unknown;
  int64_t known = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      STRATA_CHECK(!unknown, ShapeError, "{}: only one dimension can be -1, got shape {}", op, shape);
      unknown = i;
    } else {
      STRATA_CHECK(shape[i] >= 0, ShapeError, "{}: invalid size {} in shape {}", op, shape[i], shape);
      STRATA_CHECK(!__builtin_mul_overflow(known, shape[i], &known), ShapeError,
                   "{}: shape {} has more elements than a 64-bit count holds", op, shape);
    }
  }
  if (unknown) {
    STRATA_CHECK(known != 0, ShapeError,
                 "{}: cannot infer the -1 in shape {} for a tensor of {} elements: the size could be anything", op,
                 shape, numel);
    STRATA_CHECK(numel % known == 0, ShapeError, "{}: shape {} is invalid for a tensor of {} elements", op, shape,
                 numel);
    out[*unknown] = numel / known;
  } else {
    STRATA_CHECK(known == numel, ShapeError, "{}: shape {} is invalid for a tensor of {} elements", op, shape, numel);
  }
  // With a zero dimension the others can be anything; their strides must still fit.
  STRATA_CHECK(checked_span(out).has_value(), ShapeError, "{}: shape {} is too large to index", op, out);
  return out;
}

// Note [When a view can be reshaped]
// A view to a new shape exists when every run of old dimensions that is contiguous in memory ("chunk") is split or
// merged into new dimensions without crossing chunk boundaries (the rule of PyTorch's computeStride). Walking from
// the innermost dimension, each chunk must be covered exactly by a run of new dimensions, whose strides are then
// multiples of the chunk's innermost stride.
std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& new_shape) {
  if (old_shape.empty()) return Strides(new_shape.size(), 1);
  const int64_t count = numel(old_shape);
  if (count == 0) return contiguous_strides(new_shape);
  Strides out(new_shape.size(), 1);
  auto view_d = new_shape.ssize() - 1;
  int64_t chunk_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (auto d = old_shape.ssize() - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    const bool chunk_ends = d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      out[view_d] = view_numel * chunk_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = old_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

/// Records view `out` of `self` with the gradient g -> f(g, self's shape) (Note [Autograd hooks in the tensors
/// layer]); nothing is copied unless the view is recorded.
template <typename F>
Tensor recorded(const char* op, const Tensor& self, Tensor out, F f) {
  if (detail::needs_grad({&self})) {
    detail::record(
        op, {&self}, out, [f, in_shape = self.shape()](const Tensor& g) { return std::vector<Tensor>{f(g, in_shape)}; },
        detail::Saves::kNothing);
  }
  return out;
}

/// The gradient of a view that picks part of `shape`: zeros with g written into the part `pick` selects.
template <typename Pick>
Tensor scatter_into(const Shape& shape, const Tensor& g, Pick pick) {
  Tensor z = zeros(shape, TensorOptions(g.dtype()).device(g.device()));
  pick(z).copy_(g);
  return z;
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  const Shape target = infer_size("view", shape, numel());
  const std::optional<Strides> strides = view_strides(this->shape(), this->strides(), target);
  STRATA_CHECK(strides.has_value(), ShapeError,
               "view: shape {} is not compatible with the input's shape {} and strides {}: a new dimension would "
               "span memory that is not contiguous; use reshape() (which copies when needed) or contiguous() first",
               shape, this->shape(), strides_str(this->strides()));
  return recorded("view", *this, Tensor(this->storage(), this->dtype(), target, *strides, this->offset()),
                  [](const Tensor& g, const Shape& in_shape) { return g.reshape(in_shape); });
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape target = infer_size("reshape", shape, numel());
  const auto back = [](const Tensor& g, const Shape& in_shape) { return g.reshape(in_shape); };
  if (std::optional<Strides> strides = view_strides(this->shape(), this->strides(), target)) {
    return recorded("reshape", *this, Tensor(this->storage(), this->dtype(), target, *strides, this->offset()), back);
  }
  const Tensor dense = contiguous();
  return recorded("reshape", *this,
                  Tensor(dense.storage(), this->dtype(), target, contiguous_strides(target), dense.offset()), back);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, dim(), "flatten");
  end = wrap_dim(end, dim(), "flatten");
  STRATA_CHECK(start <= end, IndexError, "flatten: start dimension {} comes after end dimension {}", start, end);
  Shape shape;
  for (int64_t d = 0; d < start; ++d) shape.push_back(this->shape()[d]);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= this->shape()[d];
  shape.push_back(merged);
  for (int64_t d = end + 1; d < dim(); ++d) shape.push_back(this->shape()[d]);
  return reshape(shape);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  if (dim() == 0 || d0 == d1) return *this;
  Shape shape = this->shape();
  Strides strides = this->strides();
  std::swap(shape[d0], shape[d1]);
  std::swap(strides[d0], strides[d1]);
  return recorded("transpose", *this,
                  Tensor(this->storage(), this->dtype(), std::move(shape), std::move(strides), this->offset()),
                  [d0, d1](const Tensor& g, const Shape&) { return g.transpose(d0, d1); });
}

Tensor Tensor::permute(const Shape& dims) const {
  STRATA_CHECK(dims.ssize() == dim(), ShapeError,
               "permute: got {} dimension(s) {} for a tensor with {} dimension(s) (shape {})", dims.size(), dims, dim(),
               this->shape());
  Shape shape(dims.size());
  Strides strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto d = static_cast<std::size_t>(wrap_dim(dims[i], dim(), "permute"));
    STRATA_CHECK(!seen[d], InvalidArgumentError, "permute: dimension {} appears twice in {}", d, dims);
    seen[d] = true;
    shape[i] = this->shape()[d];
    strides[i] = this->strides()[d];
  }
  Tensor out(this->storage(), this->dtype(), std::move(shape), std::move(strides), this->offset());
  if (detail::needs_grad({this})) {
    Shape inverse(dims.size());  // the gradient is permuted back by the inverse permutation
    for (std::size_t i = 0; i < dims.size(); ++i) {
      inverse[static_cast<std::size_t>(wrap_dim(dims[i], dim(), "permute"))] = static_cast<int64_t>(i);
    }
    detail::record(
        "permute", {this}, out, [inverse](const Tensor& g) { return std::vector<Tensor>{g.permute(inverse)}; },
        detail::Saves::kNothing);
  }
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  check_has_dims(*this, "narrow");
  d = wrap_dim(d, dim(), "narrow");
  const int64_t size = this->shape()[d];
  if (start < 0 && start >= -size) start += size;
  STRATA_CHECK(start >= 0 && start <= size && length >= 0 && length <= size - start, IndexError,
               "narrow: start {} and length {} do not fit dimension {} of size {} (shape {})", start, length, d, size,
               this->shape());
  Shape shape = this->shape();
  shape[d] = length;
  return recorded("narrow", *this,
                  Tensor(this->storage(), this->dtype(), std::move(shape), this->strides(),
                         this->offset() + start * this->strides()[d]),
                  [d, start, length](const Tensor& g, const Shape& in_shape) {
                    return scatter_into(in_shape, g, [&](const Tensor& z) { return z.narrow(d, start, length); });
                  });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_has_dims(*this, "select");
  d = wrap_dim(d, dim(), "select");
  const int64_t size = this->shape()[d];
  STRATA_CHECK(index >= -size && index < size, IndexError,
               "select: index {} is out of range for dimension {} of size {} (shape {})", index, d, size, this->shape());
  if (index < 0) index += size;
  Shape shape = this->shape();
  Strides strides = this->strides();
  shape.erase(static_cast<std::size_t>(d));
  strides.erase(static_cast<std::size_t>(d));
  return recorded("select", *this,
                  Tensor(this->storage(), this->dtype(), std::move(shape), std::move(strides),
                         this->offset() + index * this->strides()[d]),
                  [d, index](const Tensor& g, const Shape& in_shape) {
                    return scatter_into(in_shape, g, [&](const Tensor& z) { return z.select(d, index); });
                  });
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  check_has_dims(*this, "slice");
  STRATA_CHECK(step > 0, InvalidArgumentError, "slice: step must be positive, got {}", step);
  d = wrap_dim(d, dim(), "slice");
  const int64_t size = this->shape()[d];
  // Python semantics: negative bounds count from the end, then everything is clamped to [0, size].
  const auto clamp_bound = [size](int64_t b) { return std::clamp<int64_t>(b < 0 ? b + size : b, 0, size); };
  const int64_t first = clamp_bound(start.value_or(0));
  const int64_t last = std::max(first, clamp_bound(end.value_or(size)));
  Shape shape = this->shape();
  Strides strides = this->strides();
  shape[d] = (last - first) / step + ((last - first) % step != 0 ? 1 : 0);
  STRATA_CHECK(shape[d] <= 1 || !__builtin_mul_overflow(strides[d], step, &strides[d]), InvalidArgumentError,
               "slice: step {} times the stride {} of dimension {} does not fit in 64 bits", step, this->strides()[d],
               d);
  return recorded("slice", *this,
                  Tensor(this->storage(), this->dtype(), std::move(shape), std::move(strides),
                         this->offset() + first * this->strides()[d]),
                  [d, first, last, step](const Tensor& g, const Shape& in_shape) {
                    return scatter_into(in_shape, g, [&](const Tensor& z) { return z.slice(d, first, last, step); });
                  });
}

Tensor Tensor::squeeze() const {
  Shape shape;
  Strides strides;
  for (int64_t d = 0; d < dim(); ++d) {
    if (this->shape()[d] == 1) continue;
    shape.push_back(this->shape()[d]);
    strides.push_back(this->strides()[d]);
  }
  return recorded("squeeze", *this,
                  Tensor(this->storage(), this->dtype(), std::move(shape), std::move(strides), this->offset()),
                  [](const Tensor& g, const Shape& in_shape) { return g.reshape(in_shape); });
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || this->shape()[d] != 1) return *this;  // as in PyTorch, squeezing a dim that is not 1 is a no-op
  Shape shape = this->shape();
  Strides strides = this->strides();
  shape.erase(static_cast<std::size_t>(d));
  strides.erase(static_cast<std::size_t>(d));
  return recorded("squeeze", *this,
                  Tensor(this->storage(), this->dtype(), std::move(shape), std::move(strides), this->offset()),
                  [](const Tensor& g, const Shape& in_shape) { return g.reshape(in_shape); });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_new_dim("unsqueeze", d, dim());
  Shape shape = this->shape();
  Strides strides = this->strides();
  const int64_t stride = d >= dim() ? 1 : this->shape()[d] * this->strides()[d];
  shape.insert(static_cast<std::size_t>(d), 1);
  strides.insert(static_cast<std::size_t>(d), stride);
  return recorded("unsqueeze", *this,
                  Tensor(this->storage(), this->dtype(), std::move(shape), std::move(strides), this->offset()),
                  [](const Tensor& g, const Shape& in_shape) { return g.reshape(in_shape); });
}

Tensor Tensor::expand(const Shape& shape) const {
  STRATA_CHECK(shape.ssize() >= dim(), ShapeError,
               "expand: the target shape {} has fewer dimensions than the tensor's shape {}", shape, this->shape());
  const auto n = shape.ssize();
  const auto lead = n - dim();
  Shape out_shape(shape.size());
  Strides out_strides(shape.size());
  for (auto i = n - 1; i >= 0; --i) {
    const auto d = i - lead;  // the tensor's dimension, negative for a new leading one
    int64_t size = d >= 0 ? this->shape()[d] : 1;
    int64_t stride = d >= 0 ? this->strides()[d] : (i + 1 < n ? out_shape[i + 1] * out_strides[i + 1] : 1);
    int64_t target = shape[i];
    if (target == -1) {
      STRATA_CHECK(d >= 0, ShapeError, "expand: -1 is not allowed for the new leading dimension {} of shape {}", i,
                   shape);
      target = size;
    }
    STRATA_CHECK(target >= 0, ShapeError, "expand: invalid size {} in target shape {}", target, shape);
    if (size != target) {
      STRATA_CHECK(size == 1, ShapeError,
                   "expand: cannot expand shape {} to {}: dimension {} has size {}, and only size-1 dimensions can "
                   "be expanded",
                   this->shape(), shape, d, size);
      size = target;
      stride = 0;
    }
    out_shape[i] = size;
    out_strides[i] = stride;
  }
  STRATA_CHECK(checked_span(out_shape).has_value(), ShapeError,
               "expand: the target shape {} has more elements than a 64-bit count holds", shape);
  return recorded("expand", *this,
                  Tensor(this->storage(), this->dtype(), std::move(out_shape), std::move(out_strides), this->offset()),
                  [](const Tensor& g, const Shape& in_shape) { return detail::sum_to(g, in_shape); });
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  STRATA_CHECK(!tensors.empty(), InvalidArgumentError, "cat: expected a non-empty list of tensors");
  const Device device = tensors[0].device();
  DType dtype = tensors[0].dtype();
  const Tensor* reference = nullptr;  // the first tensor that takes part (see below)
  std::size_t reference_pos = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    STRATA_CHECK(t.defined(), InvalidArgumentError, "cat: tensors[{}] is undefined", i);
    STRATA_CHECK(t.device() == device, DeviceMismatchError,
                 "cat: tensors[0] is on {} but tensors[{}] is on {}; Strata does not copy between devices "
                 "implicitly: move one of them with .to(device)",
                 device, i, t.device());
    dtype = promote_types(dtype, t.dtype());
    // As in PyTorch, 1-D empty tensors are skipped whatever the other shapes, so that an empty accumulator works.
    if (reference == nullptr && !(t.dim() == 1 && t.numel() == 0)) {
      reference = &t;
      reference_pos = i;
    }
  }
  if (reference == nullptr) return empty({0}, TensorOptions(dtype).device(device));
  STRATA_CHECK(reference->dim() > 0, ShapeError, "cat: tensors[{}] is 0-dimensional and cannot be concatenated",
               reference_pos);
  dim = wrap_dim(dim, reference->dim(), "cat");
  Shape out_shape = reference->shape();
  out_shape[dim] = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dim() == 1 && t.numel() == 0) continue;
    STRATA_CHECK(t.dim() == reference->dim(), ShapeError,
                 "cat: tensors[{}] has shape {} but tensors[{}] has shape {}; all need the same number of dimensions",
                 reference_pos, reference->shape(), i, t.shape());
    for (int64_t d = 0; d < t.dim(); ++d) {
      STRATA_CHECK(d == dim || t.size(d) == reference->size(d), ShapeError,
                   "cat: sizes must match except in dimension {}, but tensors[{}] has shape {} and tensors[{}] has "
                   "shape {} (dimension {}: {} vs {})",
                   dim, reference_pos, reference->shape(), i, t.shape(), d, reference->size(d), t.size(d));
    }
    STRATA_CHECK(!__builtin_add_overflow(out_shape[dim], t.size(dim), &out_shape[dim]), ShapeError,
                 "cat: the sizes in dimension {} add up to more than a 64-bit count holds", dim);
  }
  Tensor out = empty(out_shape, TensorOptions(dtype).device(device));
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    if ((t.dim() == 1 && t.numel() == 0) || t.size(dim) == 0) continue;
    detail::copy_values(out.narrow(dim, at, t.size(dim)), t);
    at += t.size(dim);
  }
  if (detail::needs_grad_list(tensors)) {
    // Each input gets its slice of the gradient along dim (skipped empty 1-D inputs get none). Only the sizes are
    // kept: the inputs' values are not needed, so holding them would only keep their memory alive.
    struct Part {
      int64_t size;  // along dim; -1 for a skipped empty 1-D input
      Shape shape;
      DType dtype;
      bool wants_grad;
    };
    std::vector<Part> parts;
    parts.reserve(tensors.size());
    for (const Tensor& t : tensors) {
      const bool skipped = t.dim() == 1 && t.numel() == 0;
      parts.push_back({skipped ? -1 : t.size(dim), t.shape(), t.dtype(), t.requires_grad()});
    }
    detail::record_list(
        "cat", tensors, out,
        [parts = std::move(parts), dim](const Tensor& g) {
          std::vector<Tensor> grads(parts.size());
          int64_t offset = 0;
          for (std::size_t i = 0; i < parts.size(); ++i) {
            const Part& p = parts[i];
            if (p.size < 0) continue;
            if (p.wants_grad) {
              Tensor slice = detail::sum_to(g.narrow(dim, offset, p.size), p.shape);
              grads[i] = slice.dtype() == p.dtype ? slice : slice.to(p.dtype);
            }
            offset += p.size;
          }
          return grads;
        },
        detail::Saves::kNothing);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  STRATA_CHECK(!tensors.empty(), InvalidArgumentError, "stack: expected a non-empty list of tensors");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    STRATA_CHECK(tensors[i].defined(), InvalidArgumentError, "stack: tensors[{}] is undefined", i);
    STRATA_CHECK(tensors[i].shape() == tensors[0].shape(), ShapeError,
                 "stack: all tensors need the same shape, but tensors[0] has shape {} and tensors[{}] has shape {}",
                 tensors[0].shape(), i, tensors[i].shape());
  }
  dim = wrap_new_dim("stack", dim, tensors[0].dim());
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(dim));
  return cat(parts, dim);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) { return ops::broadcast_shapes(op, a, b); }

bool detail::is_view_op(std::string_view op) {
  for (std::string_view view :
       {"view", "reshape", "transpose", "permute", "narrow", "select", "slice", "squeeze", "unsqueeze", "expand"}) {
    if (op == view) return true;
  }
  return false;
}

// --- split and chunk: narrow views, so each part's gradient flows back to its slice of the input ---

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  constexpr const char* op = "split";
  STRATA_CHECK(a.defined(), InvalidArgumentError, "{}: argument 0 is an undefined tensor", op);
  STRATA_CHECK(a.dim() > 0, ShapeError, "{}: expects at least a 1-dimensional tensor", op);
  dim = ops::wrap_dim(op, dim, a.dim());
  STRATA_CHECK(split_size >= 0, InvalidArgumentError, "{}: expects split_size be non-negative, but got split_size={}",
               op, split_size);
  const int64_t size = a.size(dim);
  STRATA_CHECK(split_size > 0 || size == 0, InvalidArgumentError,
               "{}: split_size can only be 0 if dimension size is 0, but got dimension size of {}", op, size);
  // As PyTorch: one part (empty) for an empty dim, else ceil(size / split_size) parts.
  const int64_t parts = split_size == 0 ? 1 : std::max<int64_t>((size + split_size - 1) / split_size, 1);
  std::vector<Tensor> out;
  out.reserve(static_cast<std::size_t>(parts));
  for (int64_t i = 0; i < parts; ++i) {
    const int64_t start = i * split_size;
    out.push_back(a.narrow(dim, start, std::min(split_size, size - start)));
  }
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& a, const std::vector<int64_t>& split_sizes, int64_t dim) {
  constexpr const char* op = "split_with_sizes";
  STRATA_CHECK(a.defined(), InvalidArgumentError, "{}: argument 0 is an undefined tensor", op);
  STRATA_CHECK(a.dim() > 0, ShapeError, "{}: expects at least a 1-dimensional tensor", op);
  dim = ops::wrap_dim(op, dim, a.dim());
  const int64_t size = a.size(dim);
  int64_t total = 0;
  for (const int64_t n : split_sizes) {
    STRATA_CHECK(n >= 0, InvalidArgumentError,
                 "{}: expects split_sizes have only non-negative entries, but got split_sizes=[{}]", op,
                 fmt::join(split_sizes, ", "));
    total += n;
  }
  STRATA_CHECK(total == size, InvalidArgumentError,
               "{}: expects split_sizes to sum exactly to {} (input tensor's size at dimension {}), but got "
               "split_sizes=[{}]",
               op, size, dim, fmt::join(split_sizes, ", "));
  std::vector<Tensor> out;
  out.reserve(split_sizes.size());
  int64_t start = 0;
  for (const int64_t n : split_sizes) {
    out.push_back(a.narrow(dim, start, n));
    start += n;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  constexpr const char* op = "chunk";
  STRATA_CHECK(a.defined(), InvalidArgumentError, "{}: argument 0 is an undefined tensor", op);
  STRATA_CHECK(a.dim() > 0, ShapeError, "{}: expects at least a 1-dimensional tensor", op);
  STRATA_CHECK(chunks > 0, InvalidArgumentError, "{}: expects `chunks` to be greater than 0, got: {}", op, chunks);
  dim = ops::wrap_dim(op, dim, a.dim());
  const int64_t size = a.size(dim);
  const int64_t split_size = (size + chunks - 1) / chunks;
  // An empty dim gives `chunks` empty parts, as in PyTorch (split would give one).
  if (size == 0) return split_with_sizes(a, std::vector<int64_t>(static_cast<std::size_t>(chunks), 0), dim);
  return split(a, split_size, dim);
}

}  // namespace strata
