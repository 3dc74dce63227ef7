#include "strata/core/device.h"

#include <charconv>
#include <ostream>

#include "strata/core/error.h"

namespace strata {

std::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
    case DeviceType::HIP: return "hip";
  }
  return "unknown";
}

DriverLibrary device_driver_library(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return {};
    case DeviceType::CUDA: return {"libcuda.so.1", "the NVIDIA driver library"};
    case DeviceType::HIP: return {"libamdhip64.so.5", "AMD's HIP runtime library (ROCm 5)"};
  }
  return {};
}

namespace {

[[noreturn]] void throw_bad_device(std::string_view text, std::string_view why) {
  STRATA_THROW(InvalidArgumentError,
               "invalid device string '{}': {}; expected 'cpu', 'cpu:N', 'cuda', 'cuda:N', 'hip' or 'hip:N' with N a "
               "non-negative integer",
               text, why);
}

}  // namespace

Device::Device(std::string_view text) : type_(DeviceType::CPU), index_(-1) {
  const auto colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  if (kind == "cpu") {
    type_ = DeviceType::CPU;
  } else if (kind == "cuda") {
    type_ = DeviceType::CUDA;
  } else if (kind == "hip") {
    type_ = DeviceType::HIP;
  } else {
    throw_bad_device(text, fmt::format("unknown device type '{}'", kind));
  }
  if (colon == std::string_view::npos) {
    *this = Device(type_);  // the CPU's index is never unspecified
    return;
  }

  const std::string_view digits = text.substr(colon + 1);
  int value = 0;
  const auto* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  if (digits.empty() || ec != std::errc() || ptr != end || value < 0) {
    throw_bad_device(text, fmt::format("'{}' is not a valid device index", digits));
  }
  index_ = value;
}

std::string Device::str() const {
  if ((type_ == DeviceType::CPU && index_ == 0) || index_ < 0) return std::string(device_type_name(type_));
  return fmt::format("{}:{}", device_type_name(type_), index_);
}

std::ostream& operator<<(std::ostream& os, Device device) { return os << device.str(); }

}  // namespace strata
