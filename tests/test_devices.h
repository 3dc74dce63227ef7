#pragma once

#include <string>
#include <vector>

#include "strata/core/device.h"
#include "strata/runtime/cuda.h"

namespace strata::testing {

/// The devices every device-parametrised test runs on: the CPU, plus cuda:0 when a GPU is usable.
inline std::vector<Device> available_devices() {
  std::vector<Device> devices{kCPU};
  if (cuda::is_available()) devices.emplace_back(DeviceType::CUDA, 0);
  return devices;
}

/// Name for gtest's parametrised test suffixes: "cpu", "cuda0".
inline std::string device_test_name(Device device) {
  std::string name = device.str();
  std::erase(name, ':');
  return name;
}

}  // namespace strata::testing
