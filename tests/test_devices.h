#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/core/device.h"
#include "strata/runtime/cuda.h"

// A test that needs CUDA skips with this message where CUDA is unavailable. scripts/gpu-check fails on exactly these
// skips (on a GPU machine they mean the plugin or the GPU was not found); any other skip reason is only listed.
#define STRATA_SKIP_WITHOUT_CUDA()                                                                         \
  do {                                                                                                     \
    if (!::strata::cuda::is_available()) {                                                                 \
      GTEST_SKIP() << "CUDA unavailable: " << ::strata::cuda::unavailable_reason();                        \
    }                                                                                                      \
  } while (false)

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
