// Every op on every available device, compared with the CPU on the same inputs (ggml's test-backend-ops idea).
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "strata/runtime/cuda.h"
#include "tensor/cross_device_cases.h"
#include "test_devices.h"

namespace strata {
namespace {

class CrossDevice : public ::testing::TestWithParam<Device> {};

TEST_P(CrossDevice, EveryOpMatchesTheCpu) {
  const Device device = GetParam();
  // cuda:0 stays the current device: an op runs on its tensors' device whatever is current (on cuda:1 and up, a
  // kernel launched on the current device would run on the wrong GPU or fail). Without a GPU there is none to keep.
  std::optional<cuda::DeviceGuard> current;
  if (cuda::is_available()) current.emplace(0);
  manual_seed(7);
  const std::vector<Tensor> host = testing::cross_device_inputs();
  std::vector<Tensor> moved;
  for (const Tensor& t : host) moved.push_back(t.to(device));
  for (const testing::OpCase& op : testing::op_cases()) testing::expect_matches_cpu(op, host, moved, device);
}

// Every device but cpu:0, the reference: the GPUs, and cpu:1 and up when virtual CPU devices are on.
std::vector<Device> other_devices() {
  std::vector<Device> devices;
  for (Device d : testing::available_devices()) {
    if (d != kCPU) devices.push_back(d);
  }
  return devices;
}

INSTANTIATE_TEST_SUITE_P(OtherDevices, CrossDevice, ::testing::ValuesIn(other_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CrossDevice);

TEST(CrossDeviceOnThisMachine, RunsWhereAGpuIsPresent) {
  STRATA_SKIP_WITHOUT_CUDA();
  EXPECT_FALSE(other_devices().empty());
}

// The CPU against itself with non-contiguous copies of the inputs: the same table, exercising strided paths here.
TEST(CrossDeviceOnThisMachine, StridedInputsMatchContiguousOnes) {
  manual_seed(7);
  const std::vector<Tensor> host = testing::cross_device_inputs();
  std::vector<Tensor> strided;
  for (const Tensor& t : host) {
    if (t.dim() != 2) {
      strided.push_back(t);
      continue;
    }
    strided.push_back(t.t().contiguous().t());  // same values, column-major layout
  }
  for (const testing::OpCase& op : testing::op_cases()) testing::expect_matches_cpu(op, host, strided, kCPU);
}

}  // namespace
}  // namespace strata
