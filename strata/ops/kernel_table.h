#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "strata/core/device.h"
#include "strata/core/dtype.h"
#include "strata/core/error.h"
#include "strata/core/scalar.h"
#include "strata/core/tensor_view.h"
#include "strata/runtime/backend.h"
#include "strata/runtime/profiler.h"

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

/// A set of dtypes (a bit per DType).
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> dtypes) {
    for (DType d : dtypes) bits_ |= bit(d);
  }
  static constexpr DTypeSet all() { return from_bits((1u << kDTypeCount) - 1); }
  static constexpr DTypeSet floating() { return {DType::F16, DType::BF16, DType::F32, DType::F64}; }
  static constexpr DTypeSet from_bits(std::uint32_t bits) {
    DTypeSet s;
    s.bits_ = bits & ((1u << kDTypeCount) - 1);
    return s;
  }
  constexpr bool contains(DType d) const { return (bits_ & bit(d)) != 0; }
  constexpr std::uint32_t bits() const { return bits_; }
  constexpr bool operator==(const DTypeSet&) const = default;

 private:
  static constexpr std::uint32_t bit(DType d) { return 1u << static_cast<int>(d); }
  std::uint32_t bits_ = 0;
};

// Note [What the op table knows about dtypes]
// A kernel picks its C++ element type with a switch over the dtype (kernels::dispatch), so which dtypes it handles
// is decided inside the kernel and is not visible from the table. A registration may therefore list the dtypes its
// kernel handles, taken from the same compile-time facts its dispatch tests (the elementwise ops' kSupported,
// pooling's floating dispatch, copy and fill's switch over every dtype). Where a registration lists none (the
// reductions, softmax, indexing, factories, GEMM and convolution, whose dtype rules live in the front ends'
// checks or depend on the op's parameters), the table knows only that the kernel exists, and supports() says so
// rather than guessing. The list is kept per device type: a backend built on a vendor library may cover fewer
// dtypes than the portable kernel.

// Note [Counting kernel calls]
// The op-coverage test (tests/tensor/op_coverage_test.cpp) must know which (op, device type) pairs the
// cross-device cases really reach, not which ones they were meant to reach. KernelSlot::get counts lookups per
// (op, device type) while counting is on; it is off outside that test, and then a lookup costs one more relaxed
// load of an atomic flag than the array read it is otherwise.

namespace detail {
/// The kernel registered for no dtype list: supports() answers at the (op, device type) level.
inline constexpr std::uint32_t kDTypesUnlisted = 1u << 31;
struct KernelEntry {
  std::array<std::atomic<void*>, kDeviceTypeCount> fns{};
  std::array<std::atomic<std::uint32_t>, kDeviceTypeCount> dtypes{};  // DTypeSet bits, or kDTypesUnlisted
  std::array<std::atomic<std::uint64_t>, kDeviceTypeCount> calls{};   // lookups while counting (Note [Counting ...])
  const std::type_info* signature = nullptr;
};
/// The entry of an op; created on first mention. `signature` must match across all mentions.
KernelEntry& kernel_entry(std::string_view op, const std::type_info& signature);
/// Whether KernelSlot::get counts its lookups (Note [Counting kernel calls]); defined in libstrata.
extern std::atomic<bool> counting_kernel_calls;
}  // namespace detail

/// Installs the implementation of `op` for a device type. `dtypes` lists the dtypes the kernel handles, where its
/// dispatch makes that known at compile time (Note [What the op table knows about dtypes]); without it the table
/// knows only that the kernel exists.
template <typename Fn>
void register_kernel(std::string_view op, DeviceType type, Fn* fn, std::optional<DTypeSet> dtypes = std::nullopt) {
  auto& entry = detail::kernel_entry(op, typeid(Fn*));
  entry.dtypes[static_cast<int>(type)].store(dtypes ? dtypes->bits() : detail::kDTypesUnlisted);
  entry.fns[static_cast<int>(type)].store(reinterpret_cast<void*>(fn));
}

template <typename Fn>
class Kernel;

/// A kernel as KernelSlot::get returns it: called like the function, it times the call while the profiler records
/// (Note [The profiler]); otherwise the call costs one relaxed load more than the function's.
template <typename R, typename... Args>
class Kernel<R(Args...)> {
 public:
  explicit Kernel(R (*fn)(Args...)) : fn_(fn) {}
  // The first parameter of every kernel signature is the OpCall.
  R operator()(Args... args) const {
    if (profiler::detail::on()) [[unlikely]]
      return timed(args...);
    return fn_(std::forward<Args>(args)...);
  }
  R (*function() const)(Args...) { return fn_; }

 private:
  template <typename Call, typename... Rest>
  R timed(Call&& call, Rest&&... rest) const {
    profiler::detail::OpTimer timer(call);
    (timer.operand(rest), ...);
    return fn_(std::forward<Call>(call), std::forward<Rest>(rest)...);
  }
  R (*fn_)(Args...);
};

/// A handle to one op's row of the table, resolved once.
template <typename Fn>
class KernelSlot {
 public:
  explicit KernelSlot(const char* op) : op_(op), entry_(&detail::kernel_entry(op, typeid(Fn*))) {}
  /// The implementation for `device`, or NotImplementedError naming the op and the device type.
  Kernel<Fn> get(Device device) const {
    const int type = static_cast<int>(device.type());
    void* fn = entry_->fns[type].load(std::memory_order_acquire);
    STRATA_CHECK(fn != nullptr, NotImplementedError, "{} is not implemented for {} tensors", op_,
                 device_type_name(device.type()));
    if (detail::counting_kernel_calls.load(std::memory_order_relaxed)) [[unlikely]] {
      entry_->calls[type].fetch_add(1, std::memory_order_relaxed);
    }
    return Kernel<Fn>(reinterpret_cast<Fn*>(fn));
  }
  bool has(DeviceType type) const { return entry_->fns[static_cast<int>(type)].load() != nullptr; }

 private:
  const char* op_;
  detail::KernelEntry* entry_;
};

/// One op's row of the table, as read by kernel_table().
struct KernelTableRow {
  std::string op;
  std::array<bool, kDeviceTypeCount> registered{};
  /// The dtypes a registered kernel lists; nullopt where it lists none (or where nothing is registered).
  std::array<std::optional<DTypeSet>, kDeviceTypeCount> dtypes{};
  /// Lookups counted while counting was on (Note [Counting kernel calls]).
  std::array<std::uint64_t, kDeviceTypeCount> calls{};
};

/// Every op the table knows, sorted by name: those with a kernel for some device type and those only a front end
/// has mentioned so far. The CUDA column is filled only once the plugin is loaded (find_backend(CUDA)).
std::vector<KernelTableRow> kernel_table();

/// Turns the counting of KernelSlot::get lookups on or off (Note [Counting kernel calls]); process-wide.
void set_kernel_call_counting(bool on);
/// Sets every count back to zero.
void reset_kernel_call_counts();

// The public query, strata::supports(type, op, dtype), is declared in ops/op_support.h.

// The kernel signatures of the backend-facing op set. Outputs come first and are written; inputs are read.
// Inputs of elementwise kernels already have the output's shape (broadcast dims have stride 0).
using FillFn = void(const OpCall&, const TensorView& out, const Scalar& value);
/// Strided copy with dtype conversion between two views of one device and equal shapes.
using CopyFn = void(const OpCall&, const TensorView& out, const TensorView& in);
using UnaryFn = void(const OpCall&, const TensorView& out, const TensorView& in);
using BinaryFn = void(const OpCall&, const TensorView& out, const TensorView& a, const TensorView& b);

}  // namespace strata::ops

/// Registers `fn` as the implementation of `op` for DeviceType::type at load time.
#define STRATA_REGISTER_KERNEL(op, type, Signature, fn) \
  STRATA_REGISTER_KERNEL_WITH_DTYPES(op, type, Signature, fn, ::std::nullopt)
/// The same, listing the dtypes the kernel handles (an ops::DTypeSet; Note [What the op table knows about dtypes]).
#define STRATA_REGISTER_KERNEL_WITH_DTYPES(op, type, Signature, fn, dtypes)                               \
  static const bool STRATA_CONCAT(strata_registered_, __LINE__) = [] {                                    \
    ::strata::ops::register_kernel<::strata::ops::Signature>(op, ::strata::DeviceType::type, fn, dtypes); \
    return true;                                                                                          \
  }()
#define STRATA_CONCAT_IMPL(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_IMPL(a, b)
