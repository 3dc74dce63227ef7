#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "strata/core/device.h"
#include "strata/core/dtype.h"
#include "strata/core/scalar.h"
#include "strata/core/shape.h"
#include "strata/core/tensor_view.h"
#include "strata/runtime/allocator.h"

namespace strata {

/// Memory shared by a tensor and all its views: one allocation on one device.
struct Storage {
  DataPtr data;
  std::size_t nbytes = 0;
  Device device{};
  bool pinned = false;  // page-locked host memory (see TensorOptions::pinned)
  /// Bumped by every in-place write to this memory, whichever view makes it (Note [Version counters]).
  std::atomic<uint64_t> version{0};
};

struct AutogradMeta;  // defined by the autograd layer (autograd/node.h)
class Stream;         // runtime/stream.h

/// What a Tensor handle points to: a view (dtype, shape, strides, offset) of a storage, plus autograd state.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  DType dtype = DType::F32;
  Shape shape;
  Strides strides;
  int64_t offset = 0;
  std::shared_ptr<AutogradMeta> autograd;
};

/// An n-dimensional array on a device. A Tensor is a handle: copies of it are the same tensor (like torch::Tensor),
/// sharing data, shape and autograd state. Views (transpose, narrow, reshape of contiguous data...) are new tensors
/// that share the storage with a different shape, strides and offset.
class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Strides strides, int64_t offset);

  bool defined() const { return impl_ != nullptr; }
  DType dtype() const { return impl_ ? impl_->dtype : DType::F32; }
  Device device() const { return impl_ ? impl_->storage->device : Device{}; }
  const Shape& shape() const { return impl_ ? impl_->shape : kNoShape; }
  const Strides& strides() const { return impl_ ? impl_->strides : kNoShape; }
  int64_t offset() const { return impl_ ? impl_->offset : 0; }
  int64_t dim() const { return shape().ssize(); }
  int64_t numel() const { return strata::numel(shape()); }
  /// Size of dimension d; negative d counts from the end.
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  std::size_t element_size() const { return dtype_size(dtype()); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl_ ? impl_->storage : kNoStorage; }
  bool shares_storage(const Tensor& other) const { return defined() && storage() == other.storage(); }
  /// How many in-place writes this tensor's memory has had, through any view (Note [Version counters]).
  uint64_t version() const { return impl_ ? impl_->storage->version.load(std::memory_order_relaxed) : 0; }
  /// Called by every op that writes this tensor's memory in place.
  void bump_version() const {
    if (impl_) impl_->storage->version.fetch_add(1, std::memory_order_relaxed);
  }
  /// True when both handles are the same tensor (not merely the same data).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  /// Equal for handles to the same tensor (is_same): a key for maps from tensors, such as the Python bindings' one
  /// object per tensor.
  const void* identity() const { return impl_.get(); }
  /// True when this is the only handle to the tensor and no other tensor shares its storage: nobody else can see a
  /// write to it.
  bool is_sole_owner() const { return impl_ != nullptr && impl_.use_count() == 1 && impl_->storage.use_count() == 1; }
  /// Makes this tensor (and every handle to it) take other's data, dtype, shape and strides, keeping its identity
  /// and autograd state: how Module::to moves parameters in place.
  void set_data(const Tensor& other);
  /// Pointer to the first element (host-readable only for CPU tensors).
  void* data_ptr() const;
  /// Typed pointer to the first element; T must be the dtype's C++ type (uint8_t also reads bool tensors' bytes).
  template <typename T>
  T* data() const {
    check_data_type(dtype_of<std::remove_const_t<T>>, std::is_same_v<std::remove_const_t<T>, std::uint8_t>);
    return static_cast<T*>(data_ptr());
  }
  /// What ops and kernels see of this tensor.
  TensorView view() const;
  /// Throws DTypeError unless data<T>() with T of dtype `wanted` may read this tensor.
  void check_data_type(DType wanted, bool reads_bytes) const;

  // --- devices and dtypes (tensor/copy.cpp) ---
  /// Returns this very tensor when it is already on `device`, else a copy there, through which gradients flow back
  /// (see docs/architecture.md).
  Tensor to(Device device, bool non_blocking = false) const;
  /// Returns this tensor when it already has `dtype`, else a converted copy.
  Tensor to(DType dtype) const;
  /// Both in one call, as to(device).to(dtype) but converting on the side that moves fewer bytes; differentiable.
  Tensor to(Device device, DType dtype, bool non_blocking = false) const;
  /// Always allocates new memory on `device` and copies into it; differentiable (the gradient goes back to this
  /// tensor's device).
  Tensor copy_to(Device device, bool non_blocking = false) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor clone() const;
  /// This tensor when contiguous, else a contiguous copy.
  Tensor contiguous() const;
  /// Copies src (broadcast to this shape, converted to this dtype) into this tensor; both on the same device.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(const Scalar& value);
  /// Host memory that the device can copy from asynchronously (a CPU tensor in pinned memory).
  Tensor pin_memory() const;
  bool is_pinned() const;
  /// Says that work queued on `stream` uses this tensor's memory, so that when the tensor is freed the memory is not
  /// handed out again before that work has run (as torch.Tensor.record_stream; see Note [Memory used on other
  /// streams] in allocator.h). Non-blocking copies from pinned memory record their stream themselves.
  void record_stream(const Stream& stream) const;

  // --- reading values on the host (synchronise, counted; tensor/copy.cpp) ---
  template <typename T>
  std::vector<T> to_vector() const;
  /// The single value of a one-element tensor.
  Scalar item() const;
  template <typename T>
  T item() const {
    return item().to<T>();
  }

  // --- views (tensor/views.cpp) ---
  Tensor view(const Shape& shape) const;  // -1 allowed once; needs compatible strides
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor permute(const Shape& dims) const;
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  Tensor select(int64_t d, int64_t index) const;
  /// Python-style slice [start, end) with step > 0 along d; negative start/end count from the end.
  Tensor slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t d) const;
  Tensor unsqueeze(int64_t d) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a size; new leading dims allowed
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }

  // --- autograd (defined in autograd/engine.cpp; see Note [Autograd hooks in the tensors layer]) ---
  bool requires_grad() const;
  /// Marks a (floating) leaf tensor as needing its gradient; returns *this.
  Tensor& requires_grad_(bool enable = true);
  /// The accumulated gradient, or an undefined tensor.
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  bool is_leaf() const;
  /// Name of the op that produced this tensor ("" for leaves).
  std::string grad_fn_name() const;
  /// Computes gradients of this tensor w.r.t. the leaves that require grad (gradient defaults to 1 for a
  /// one-element tensor). The graph is freed unless retain_graph.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  /// The same data, cut from the graph.
  Tensor detach() const;
  /// Calls hook(grad) when this tensor's gradient is computed; a defined result replaces the gradient.
  void register_hook(std::function<Tensor(const Tensor&)> hook);
  /// Calls hook(grad()) each time backward has accumulated a gradient into this leaf (PyTorch's
  /// register_post_accumulate_grad_hook): what DistributedDataParallel starts each bucket's all-reduce from.
  void register_post_accumulate_grad_hook(std::function<void(const Tensor& grad)> hook);
  /// The autograd state (created on demand by the autograd layer).
  std::shared_ptr<AutogradMeta>& autograd_meta() const;

  // --- printing (tensor/print.cpp) ---
  /// Values (summarised when large) and a trailer such as `<Tensor 2x3 f32 @cuda:0>`.
  std::string str() const;

 private:
  static const Shape kNoShape;
  static const std::shared_ptr<Storage> kNoStorage;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// Wraps a negative dimension index and checks it against `dim`; `op` names the caller for the error.
int64_t wrap_dim(int64_t d, int64_t dim, const char* op);

}  // namespace strata
