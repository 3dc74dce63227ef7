#pragma once

// Mixed precision as PyTorch's autocast: Note [Autocast] in tensor/autocast.cpp.

#include <array>
#include <initializer_list>
#include <optional>

#include "strata/core/device.h"
#include "strata/core/dtype.h"
#include "strata/tensor/tensor.h"

namespace strata::amp {

/// Autocast's setting for one device type on one thread.
struct AutocastState {
  bool enabled = false;
  DType dtype = DType::BF16;
};

/// The default low-precision dtype of a device type, as PyTorch's: bf16 on the CPU, f16 on GPUs.
DType default_autocast_dtype(DeviceType type);

/// This thread's setting for `type`.
AutocastState autocast_state(DeviceType type);
inline bool autocast_enabled(DeviceType type) { return autocast_state(type).enabled; }

/// Sets this thread's setting for `type`; the dtype must be f16 or bf16 (InvalidArgumentError naming it otherwise).
void set_autocast_state(DeviceType type, AutocastState state);

/// Autocast on `type` for the guard's lifetime (torch.autocast(device_type, dtype)): inside it the ops of the
/// low-precision list run in `dtype` (the device type's default when unset), those of the f32 list in f32. Nested
/// guards restore the setting they found.
class AutocastGuard {
 public:
  explicit AutocastGuard(DeviceType type, std::optional<DType> dtype = {}, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType type_;
  AutocastState previous_;
};

namespace detail {

/// The operands of an op of the low-precision list as autocast runs it, each floating tensor in the autocast
/// dtype; nullopt when autocast is off for their device type or every operand already is as it would be (so the op
/// calls itself again with the result, and runs on from there).
std::optional<std::array<Tensor, 4>> low_precision_operands(std::initializer_list<const Tensor*> operands);

/// The same for an op of the f32 list: its f16 and bf16 operands in f32.
std::optional<std::array<Tensor, 4>> f32_operands(std::initializer_list<const Tensor*> operands);

}  // namespace detail
}  // namespace strata::amp
