#pragma once

#include <array>
#include <atomic>
#include <source_location>
#include <string_view>
#include <typeinfo>

#include "strata/core/device.h"
#include "strata/core/error.h"
#include "strata/core/scalar.h"
#include "strata/core/tensor_view.h"
#include "strata/runtime/backend.h"

namespace strata::ops {

/// What every kernel receives besides its operands: the op's name, where to run, and the user's call site.
struct OpCall {
  const char* op;
  Device device;
  NativeStream stream;
  std::source_location where;
};

// Note [The op table]
// Operations are a table op name x device type -> function. Backends fill their column at load time (the CPU
// backend from static initialisers in libstrata, the CUDA plugin when it is loaded). The tensors layer validates
// arguments once (ops/checks.h), allocates outputs and calls the entry for the device. A missing entry is a
// NotImplementedError naming the op and the device type. Entries are looked up through a KernelSlot created
// once per call site, so a call costs one array read.

namespace detail {
struct KernelEntry {
  std::array<std::atomic<void*>, kDeviceTypeCount> fns{};
  const std::type_info* signature = nullptr;
};
/// The entry of an op; created on first mention. `signature` must match across all mentions.
KernelEntry& kernel_entry(std::string_view op, const std::type_info& signature);
}  // namespace detail

/// Installs the implementation of `op` for a device type.
template <typename Fn>
void register_kernel(std::string_view op, DeviceType type, Fn* fn) {
  detail::kernel_entry(op, typeid(Fn*)).fns[static_cast<int>(type)].store(reinterpret_cast<void*>(fn));
}

/// A handle to one op's row of the table, resolved once.
template <typename Fn>
class KernelSlot {
 public:
  explicit KernelSlot(const char* op) : op_(op), entry_(&detail::kernel_entry(op, typeid(Fn*))) {}
  /// The implementation for `device`, or NotImplementedError naming the op and the device type.
  Fn* get(Device device) const {
    void* fn = entry_->fns[static_cast<int>(device.type())].load(std::memory_order_acquire);
    STRATA_CHECK(fn != nullptr, NotImplementedError, "{} is not implemented for {} tensors", op_,
                 device_type_name(device.type()));
    return reinterpret_cast<Fn*>(fn);
  }
  bool has(DeviceType type) const { return entry_->fns[static_cast<int>(type)].load() != nullptr; }

 private:
  const char* op_;
  detail::KernelEntry* entry_;
};

// The kernel signatures of the backend-facing op set. Outputs come first and are written; inputs are read.
// Inputs of elementwise kernels already have the output's shape (broadcast dims have stride 0).
using FillFn = void(const OpCall&, const TensorView& out, const Scalar& value);
/// Strided copy with dtype conversion between two views of one device and equal shapes.
using CopyFn = void(const OpCall&, const TensorView& out, const TensorView& in);
using UnaryFn = void(const OpCall&, const TensorView& out, const TensorView& in);
using BinaryFn = void(const OpCall&, const TensorView& out, const TensorView& a, const TensorView& b);

}  // namespace strata::ops

/// Registers `fn` as the implementation of `op` for DeviceType::type at load time.
#define STRATA_REGISTER_KERNEL(op, type, Signature, fn)                                                    \
  static const bool STRATA_CONCAT(strata_registered_, __LINE__) = [] {                                    \
    ::strata::ops::register_kernel<::strata::ops::Signature>(op, ::strata::DeviceType::type, fn);         \
    return true;                                                                                          \
  }()
#define STRATA_CONCAT_IMPL(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_IMPL(a, b)
