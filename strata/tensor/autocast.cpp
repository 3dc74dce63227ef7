#include "strata/tensor/autocast.h"

#include "strata/core/error.h"

namespace strata::amp {

// Note [Autocast]
// As PyTorch's autocast, per thread and per device type: while it is on for a device type, each op on that list
// casts its floating operands before it runs, so a model written in f32 computes its products in f16 or bf16 and
// keeps f32 where the range or the sum needs it. The lists are PyTorch's, for the ops Strata has:
// - low precision (the autocast dtype): matmul, mm, bmm, addmm, linear, scaled_dot_product_attention, and conv2d
//   on GPUs;
// - f32: softmax, log_softmax, layer_norm, cross_entropy, nll_loss, mse_loss, and conv2d on the CPU, which has no
//   f16 or bf16 convolution kernel (PyTorch's CPU autocast runs it in bf16 through oneDNN).
// Every other op runs in the dtype of its inputs, and binary ops promote (bf16 + f32 is f32), as PyTorch's do.
// The cast is an ordinary recorded op, so gradients flow back to the f32 parameters in f32. Each op makes the
// check itself (low_precision_operands / f32_operands at its top) and calls itself again with the cast operands,
// which then need no cast: there is no dispatcher to hook, and no exclusion state to keep. PyTorch also caches a
// leaf's cast within a region (a weight used twice is cast once); Strata casts at each use, which costs a copy of
// the weight per use and changes no result.

namespace {

thread_local std::array<AutocastState, kDeviceTypeCount> state{
    AutocastState{false, DType::BF16}, AutocastState{false, DType::F16}, AutocastState{false, DType::F16}};

bool low_precision(DType d) { return d == DType::F16 || d == DType::BF16; }

/// The device type of the operands (the first defined one's), or nullopt.
std::optional<DeviceType> device_type_of(std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands) {
    if (t != nullptr && t->defined()) return t->device().type();
  }
  return std::nullopt;
}

template <typename Wants>
std::optional<std::array<Tensor, 4>> cast_operands(std::initializer_list<const Tensor*> operands, Wants wants) {
  const auto type = device_type_of(operands);
  if (!type || !state[static_cast<std::size_t>(*type)].enabled) return std::nullopt;
  const DType low = state[static_cast<std::size_t>(*type)].dtype;
  bool any = false;
  for (const Tensor* t : operands) {
    any = any || (t != nullptr && t->defined() && is_floating(t->dtype()) && wants(t->dtype(), low) != t->dtype());
  }
  if (!any) return std::nullopt;
  STRATA_CHECK(operands.size() <= 4, InvalidArgumentError, "autocast: an op with more than four operands");
  std::array<Tensor, 4> out;
  std::size_t k = 0;
  for (const Tensor* t : operands) {
    if (t != nullptr && t->defined()) {
      const DType to = is_floating(t->dtype()) ? wants(t->dtype(), low) : t->dtype();
      out[k] = to == t->dtype() ? *t : t->to(to);
    }
    ++k;
  }
  return out;
}

}  // namespace

DType default_autocast_dtype(DeviceType type) { return type == DeviceType::CPU ? DType::BF16 : DType::F16; }

AutocastState autocast_state(DeviceType type) { return state[static_cast<std::size_t>(type)]; }

void set_autocast_state(DeviceType type, AutocastState s) {
  STRATA_CHECK(low_precision(s.dtype), InvalidArgumentError,
               "autocast: dtype {} on {}: autocast runs products in f16 or bf16", dtype_name(s.dtype),
               device_type_name(type));
  state[static_cast<std::size_t>(type)] = s;
}

AutocastGuard::AutocastGuard(DeviceType type, std::optional<DType> dtype, bool enabled)
    : type_(type), previous_(autocast_state(type)) {
  set_autocast_state(type, {enabled, dtype.value_or(default_autocast_dtype(type))});
}

AutocastGuard::~AutocastGuard() { state[static_cast<std::size_t>(type_)] = previous_; }

namespace detail {

std::optional<std::array<Tensor, 4>> low_precision_operands(std::initializer_list<const Tensor*> operands) {
  // f64 stays f64, as PyTorch's autocast leaves it.
  return cast_operands(operands, [](DType d, DType low) { return d == DType::F64 ? d : low; });
}

std::optional<std::array<Tensor, 4>> f32_operands(std::initializer_list<const Tensor*> operands) {
  return cast_operands(operands, [](DType d, DType) { return low_precision(d) ? DType::F32 : d; });
}

}  // namespace detail
}  // namespace strata::amp
