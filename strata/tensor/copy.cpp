// Moving tensors between devices and dtypes, and reading their values on the host.

#include <cstring>

#include "strata/core/error.h"
#include "strata/ops/checks.h"
#include "strata/runtime/kernel_assert.h"
#include "strata/runtime/plugin.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/stream.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/grad_hook.h"
#include "strata/tensor/op_call.h"
#include "strata/tensor/op_checks.h"

namespace strata {

namespace {
const ops::KernelSlot<ops::CopyFn> copy_slot("copy");

// Makes the work queued on `waiter` from now on wait for the work queued so far on `done`, a stream of another device
// (Stream::wait takes only events of the stream's own device).
void wait_for(const Stream& waiter, const Stream& done) {
  Event event(done.device());
  event.record(done);
  backend(waiter.device()).wait_event(backend_index(waiter.device()), waiter.native(), event.native());
}
}  // namespace

Tensor Tensor::to(Device device, bool non_blocking) const {
  if (resolve(device) == this->device()) return *this;
  return copy_to(device, non_blocking);
}

Tensor Tensor::to(DType dtype) const {
  STRATA_CHECK(defined(), InvalidArgumentError, "to: the tensor is undefined");
  if (dtype == this->dtype()) return *this;
  Tensor out = empty(shape(), TensorOptions(dtype).device(device()));
  detail::copy_values(out, *this);
  // Only floating results carry gradients; the gradient goes back in the input's dtype.
  if (is_floating(dtype) && detail::needs_grad({this})) {
    const DType from = this->dtype();
    detail::record(
        "to", {this}, out, [from](const Tensor& g) { return std::vector<Tensor>{g.to(from)}; },
        detail::Saves::kNothing);
  }
  return out;
}

Tensor Tensor::to(Device device, DType dtype, bool non_blocking) const {
  STRATA_CHECK(defined(), InvalidArgumentError, "to: the tensor is undefined");
  // A narrowing conversion runs before the copy and a widening one after it, so the copy moves the smaller dtype.
  if (dtype_size(dtype) < dtype_size(this->dtype())) return to(dtype).to(device, non_blocking);
  return to(device, non_blocking).to(dtype);
}

// Note [Copies between devices]
// A copy between devices moves the bytes of a contiguous tensor with one backend copy on the GPU side's current
// stream, and is counted (runtime/transfer.h). Host-to-device copies are asynchronous only when asked for
// (non_blocking) and the source is pinned, as in PyTorch; device-to-host copies always wait, so the values are
// there when the call returns, and the wait is counted as a synchronisation. An asynchronous copy records its stream
// on the pinned source, so the source may be dropped at once: the pinned allocator does not hand its memory out
// again before the copy has run (Note [Memory used on other streams] in allocator.h).
//
// Note [Copies between two GPUs]
// Between two GPUs both sides are GPU sides. The source was written on its device's current stream and the output was
// allocated on the destination's, where later work will read it; the backend's peer copy runs on one stream, of the
// source's device (Backend::copy). So the copy goes on the source's current stream, behind the work that wrote the
// source, after that stream has waited for an event recorded on the destination's current stream: work queued there
// before may still use the memory the allocator handed to the output (Note [Why blocks are per stream]). Behind the
// copy, the destination's current stream waits for an event in turn, so that work queued there later sees the copied
// values, and the output's memory, once freed, is reused only after the copy. PyTorch orders its copies between GPUs
// with the same two waits.
Tensor Tensor::copy_to(Device device, bool non_blocking) const {
  STRATA_CHECK(defined(), InvalidArgumentError, "copy_to: the tensor is undefined");
  device = resolve(device);
  check_device(device);
  const Tensor src = contiguous();
  Tensor out = empty(shape(), TensorOptions(dtype()).device(device));
  const Device gpu_side = src.device().is_cpu() ? device : src.device();
  const bool between_gpus = !src.device().is_cpu() && !device.is_cpu() && src.device() != device;
  const bool blocking = !(non_blocking && src.device().is_cpu() && src.is_pinned()) || device.is_cpu();
  NativeStream stream = gpu_side.is_cpu() ? nullptr : current_stream(gpu_side).native();
  // Recorded before the copy is queued, so that no copy runs unrecorded when recording fails.
  if (!blocking) src.storage()->data.record_stream(gpu_side, stream);
  if (between_gpus) wait_for(current_stream(src.device()), current_stream(device));
  copy_bytes(out.data_ptr(), device, src.data_ptr(), src.device(), static_cast<std::size_t>(numel()) * element_size(),
             stream, blocking);
  if (between_gpus) wait_for(current_stream(device), current_stream(src.device()));
  // Differentiable, as in PyTorch: a model split over two devices trains on both sides of the split. The gradient
  // goes back to the source's device, a copy that is counted like any other.
  if (detail::needs_grad({this})) {
    const Device from = this->device();
    detail::record(
        "copy_to", {this}, out, [from](const Tensor& g) { return std::vector<Tensor>{g.to(from)}; },
        detail::Saves::kNothing);
  }
  return out;
}

Tensor Tensor::clone() const {
  STRATA_CHECK(defined(), InvalidArgumentError, "clone: the tensor is undefined");
  Tensor out = empty(shape(), TensorOptions(dtype()).device(device()));
  detail::copy_values(out, *this);
  if (detail::needs_grad({this})) {
    detail::record(
        "clone", {this}, out, [](const Tensor& g) { return std::vector<Tensor>{g}; }, detail::Saves::kNothing);
  }
  return out;
}

// contiguous() is differentiable through clone().
Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

void detail::check_writable(const char* op, const Tensor& self) {
  const Shape& shape = self.shape();
  const Strides& strides = self.strides();
  for (std::size_t d = 0; d < shape.size(); ++d) {
    STRATA_CHECK(strides[d] != 0 || shape[d] <= 1, InvalidArgumentError,
                 "{}: self (shape {}, strides {}) has elements that share memory, so it cannot be written in place; "
                 "clone() it first",
                 op, self.shape(), self.strides());
  }
}

bool detail::overlaps_elsewhere(const Tensor& self, const Tensor& other) {
  return other.shares_storage(self) &&
         !(other.offset() == self.offset() && other.shape() == self.shape() && other.strides() == self.strides());
}

// Note [Copies into overlapping memory]
// A copy whose source is another view of the destination's storage could read elements it has already overwritten
// (shifting a tensor by one with t.narrow(0, 1, n).copy_(t.narrow(0, 0, n)) gave all zeros), so such a source is
// read into a temporary first, as in-place binary ops do. A destination whose elements share memory among themselves
// (an expanded tensor) has no meaningful result and is refused, as PyTorch refuses it.
Tensor& Tensor::copy_(const Tensor& src) {
  if (defined() && src.defined() && detail::records_in_place("copy_", *this, {&src})) {
    // The gradient goes to src (summed over what was broadcast, in src's dtype); the old values get none.
    Tensor result = src.to(dtype());
    return detail::rebase_history("copy_", *this, result.shape() == shape() ? result : result.expand(shape()));
  }
  detail::copy_values(*this, src);
  return *this;
}

void detail::copy_values(const Tensor& out, const Tensor& src) {
  STRATA_CHECK(out.defined() && src.defined(), InvalidArgumentError, "copy_: the {} is undefined",
               out.defined() ? "source" : "destination");
  const TensorView out_view = out.view();
  const TensorView src_view = src.view();
  ops::check_same_device("copy_", {&out_view, &src_view});
  if (out.numel() == 0) return;
  detail::check_writable("copy_", out);
  if (detail::overlaps_elsewhere(out, src)) {
    Tensor copy = empty(src.shape(), TensorOptions(src.dtype()).device(src.device()));
    copy_values(copy, src);
    copy_values(out, copy);
    return;
  }
  out.bump_version();
  copy_slot.get(out.device())(detail::op_call("copy_", out.device()), out_view,
                              ops::broadcast_to("copy_", src_view, out.shape()));
}

Tensor Tensor::pin_memory() const {
  STRATA_CHECK(device().is_cpu(), InvalidArgumentError, "pin_memory: only CPU tensors can be pinned, not one on {}",
               device());
  if (is_pinned()) return *this;
  Tensor out = empty(shape(), TensorOptions(dtype()).pinned());
  detail::copy_values(out, *this);
  return out;
}

bool Tensor::is_pinned() const { return storage() && storage()->pinned; }

void Tensor::record_stream(const Stream& stream) const {
  STRATA_CHECK(defined(), InvalidArgumentError, "record_stream: the tensor is undefined");
  storage()->data.record_stream(stream.device(), stream.native());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  // Any CPU device's memory is the host's: reading it is no copy between devices.
  const Tensor host = (device().is_cpu() ? *this : to(kCPU)).to(dtype_of<T>).contiguous();
  std::vector<T> values(static_cast<std::size_t>(host.numel()));
  if constexpr (std::is_same_v<T, bool>) {
    const auto* bytes = host.data<std::uint8_t>();
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = bytes[i] != 0;
  } else {
    if (!values.empty()) std::memcpy(values.data(), host.data_ptr(), values.size() * sizeof(T));
  }
  return values;
}

template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<std::uint8_t> Tensor::to_vector<std::uint8_t>() const;
template std::vector<std::int32_t> Tensor::to_vector<std::int32_t>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;

Scalar Tensor::item() const {
  STRATA_CHECK(numel() == 1, ShapeError, "item: the tensor must have exactly one element, but has shape {} ({})",
               shape(), numel());
  const Tensor host = device().is_cpu() ? *this : to(kCPU);
  return visit_dtype(dtype(), [&](auto zero) -> Scalar {
    using T = decltype(zero);
    T value;
    std::memcpy(&value, host.data_ptr(), sizeof(T));
    return Scalar(value);
  });
}

Tensor& assign_view(Tensor& base, Tensor view, const Tensor& value) {
  STRATA_CHECK(base.defined() && view.defined() && value.defined(), InvalidArgumentError,
               "assignment: the {} is undefined",
               !base.defined()   ? "tensor"
               : !view.defined() ? "view"
                                 : "value");
  STRATA_CHECK(view.storage() == base.storage(), InvalidArgumentError,
               "assignment: the view must be a view of the tensor it writes");
  // Where the view lies in the base. A recorded base covers all its memory (records_in_place refuses views and
  // non-contiguous tensors), so the same offset and strides place the view in the base's gradient.
  const Shape view_shape = view.shape();
  const Strides view_strides = view.strides();
  const int64_t view_offset = view.offset() - base.offset();
  view = Tensor();  // no other handle on base's memory now, so records_in_place sees base's own
  const bool recorded = detail::records_in_place("assignment", base, {&value});
  detail::copy_values(Tensor(base.storage(), base.dtype(), view_shape, view_strides, base.offset() + view_offset),
                      value);
  if (!recorded) return base;
  const auto region = [view_shape, view_strides, view_offset](const Tensor& g) {
    return Tensor(g.storage(), g.dtype(), view_shape, view_strides, g.offset() + view_offset);
  };
  const bool value_wants_grad = value.requires_grad();
  detail::record(
      "assignment", {&base, &value}, base,
      [region, value_wants_grad, value_shape = value.shape(), value_dtype = value.dtype()](const Tensor& g) {
        Tensor g_base = g.is_contiguous() ? g.clone() : g.contiguous();  // a fresh gradient this node may write
        Tensor g_value;
        if (value_wants_grad) {
          g_value = detail::sum_to(region(g_base).clone(), value_shape);
          if (g_value.dtype() != value_dtype) g_value = g_value.to(value_dtype);
        }
        region(g_base).fill_(0);  // the old values there were overwritten: they get no gradient
        return std::vector<Tensor>{g_base, g_value};
      },
      detail::Saves::kNothing);
  return base;
}

}  // namespace strata
