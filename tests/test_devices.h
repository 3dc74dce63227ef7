#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "strata/core/device.h"
#include "strata/core/error.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/registry.h"

// A test that needs CUDA skips with this message where CUDA is unavailable. scripts/gpu-check fails on exactly these
// skips (on a GPU machine they mean the plugin or the GPU was not found); any other skip reason is only listed.
#define STRATA_SKIP_WITHOUT_CUDA()                                                                         \
  do {                                                                                                     \
    if (!::strata::cuda::is_available()) {                                                                 \
      GTEST_SKIP() << "CUDA unavailable: " << ::strata::cuda::unavailable_reason();                        \
    }                                                                                                      \
  } while (false)

namespace strata::testing {

/// The devices every device-parametrised test runs on: every CPU device (cpu:1 and up with STRATA_CPU_DEVICES, see
/// Note [Virtual CPU devices]), then every GPU.
inline std::vector<Device> available_devices() {
  int cpus = 1;
  try {
    cpus = device_count(DeviceType::CPU);
  } catch (const InvalidArgumentError&) {
    // A malformed STRATA_CPU_DEVICES: suites are listed before main(), where an exception would abort the binary;
    // the tests that set a malformed value on purpose (cpu_devices_test.cpp) see the error at their first use.
  }
  std::vector<Device> devices;
  for (int i = 0; i < cpus; ++i) devices.emplace_back(DeviceType::CPU, i);
  for (int i = 0; i < cuda::device_count(); ++i) devices.emplace_back(DeviceType::CUDA, i);
  return devices;
}

/// Every ordered pair of two different available devices: what the cross-device suites run on.
inline std::vector<std::pair<Device, Device>> available_device_pairs() {
  std::vector<std::pair<Device, Device>> pairs;
  for (Device a : available_devices()) {
    for (Device b : available_devices()) {
      if (a != b) pairs.emplace_back(a, b);
    }
  }
  return pairs;
}

/// Name for gtest's parametrised test suffixes: "cpu", "cpu1", "cuda0".
inline std::string device_test_name(Device device) {
  std::string name = device.str();
  std::erase(name, ':');
  return name;
}

/// "cpu_to_cuda0" and the like.
inline std::string device_pair_test_name(const std::pair<Device, Device>& pair) {
  return device_test_name(pair.first) + "_to_" + device_test_name(pair.second);
}

}  // namespace strata::testing
