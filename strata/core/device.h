#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace strata {

// Note [AMD GPUs are "hip", not "cuda"]
// ROCm's PyTorch calls AMD GPUs "cuda" so that CUDA scripts run unchanged. Strata gives them a type of their own:
// a machine (or a process) may hold both vendors' GPUs, and each type has its own plugin (libstrata_hip.so), its own
// reason when it is unavailable and its own column of the op table, which says what AMD lacks (matmul and
// convolution, until Debian packages hipBLAS and MIOpen). A script moves to AMD by changing "cuda" to "hip".
enum class DeviceType : std::uint8_t { CPU = 0, CUDA = 1, HIP = 2 };
inline constexpr int kDeviceTypeCount = 3;

/// Lower-case name of a device type: "cpu", "cuda", "hip".
std::string_view device_type_name(DeviceType type);

/// The vendor driver library a device type's plugin needs before it is worth opening, and how messages describe it:
/// {"libcuda.so.1", "the NVIDIA driver library"} for cuda; empty for the CPU. It sits with the type's names, not in
/// the plugin, because the registry must check it before opening the plugin (Note [Loading a device's plugin]).
struct DriverLibrary {
  std::string_view file;
  std::string_view description;
};
DriverLibrary device_driver_library(DeviceType type);

/// A device is a type and an index. Naming a device does not need it to exist; using it does.
/// A GPU's index is -1 when unspecified ("cuda" means the current CUDA device, "hip" the current AMD one). A CPU
/// device always has an index: "cpu" is cpu:0, and cpu:1 and up exist when virtual CPU devices are on (Note
/// [Virtual CPU devices]).
class Device {
 public:
  constexpr Device(DeviceType type = DeviceType::CPU, int index = -1)
      : type_(type), index_(type == DeviceType::CPU && index < 0 ? 0 : index) {}
  /// Parses "cpu", "cpu:N", "cuda", "cuda:N", "hip", "hip:N"; anything else throws InvalidArgumentError naming the
  /// string.
  Device(std::string_view text);  // NOLINT(google-explicit-constructor): mirrors torch::Device("cuda:1")
  Device(const char* text) : Device(std::string_view(text)) {}  // NOLINT

  constexpr DeviceType type() const { return type_; }
  constexpr int index() const { return index_; }
  constexpr bool has_index() const { return index_ >= 0; }
  constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }
  constexpr bool is_hip() const { return type_ == DeviceType::HIP; }

  /// "cpu" for cpu:0 (the one CPU device unless virtual devices are on), "cpu:N", "cuda", "cuda:N", "hip", "hip:N".
  std::string str() const;

  friend constexpr bool operator==(Device a, Device b) = default;

 private:
  DeviceType type_;
  int index_;
};

std::ostream& operator<<(std::ostream& os, Device device);

inline constexpr Device kCPU{DeviceType::CPU};
/// The current CUDA device, as Device("cuda"); torch::kCUDA reads the same.
inline constexpr Device kCUDA{DeviceType::CUDA};

}  // namespace strata

template <>
struct std::hash<strata::Device> {
  size_t operator()(strata::Device d) const noexcept {
    // The index is widened before adding 1: cuda:2147483647 is a valid (if absent) device.
    return (static_cast<size_t>(d.type()) << 16) ^ (static_cast<size_t>(static_cast<int64_t>(d.index()) + 1));
  }
};

template <>
struct fmt::formatter<strata::Device> : fmt::formatter<std::string_view> {
  auto format(strata::Device d, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(d.str(), ctx);
  }
};
