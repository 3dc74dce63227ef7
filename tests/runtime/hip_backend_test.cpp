// The HIP (AMD) backend plugin, libstrata_hip, as seen through libstrata. No machine of ours has an AMD GPU, so what
// is tested is that a build with hipcc has the plugin, that it loads, and that it declines with a one-line reason
// that says why HIP is unavailable; and that "hip" devices are named and refused like any absent device.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "strata/core/error.h"
#include "strata/ops/op_support.h"
#include "strata/runtime/registry.h"
#include "runtime/plugin_entry.h"

namespace strata {
namespace {

// /dev/kfd is the AMD GPU driver's device file; ROCm finds GPUs through it.
bool machine_has_amd_gpu() {
  std::error_code ec;
  return std::filesystem::exists("/dev/kfd", ec);
}

TEST(HipDevice, IsNamedHipAndParsed) {
  EXPECT_EQ(Device("hip:1"), Device(DeviceType::HIP, 1));
  EXPECT_EQ(Device("hip").str(), "hip");
  EXPECT_EQ(Device(DeviceType::HIP, 2).str(), "hip:2");
  EXPECT_TRUE(Device("hip:0").is_hip());
  EXPECT_FALSE(Device("hip:0").is_cuda());
  EXPECT_EQ(plugin_file(DeviceType::HIP), "libstrata_hip.so");
  try {
    (void)Device("rocm:0");
    ADD_FAILURE() << "'rocm:0' was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'hip' or 'hip:N'"), std::string::npos) << e.what();
  }
}

TEST(HipAvailability, ReasonIsGivenExactlyWhenNoAmdGpuIsUsable) {
  const std::string reason = unavailable_reason(DeviceType::HIP);
  EXPECT_EQ(device_count(DeviceType::HIP) > 0, reason.empty()) << reason;
  EXPECT_EQ(reason.find('\n'), std::string::npos) << "the reason must be one line: " << reason;
  if (machine_has_amd_gpu()) return;
  EXPECT_FALSE(reason.empty());
  EXPECT_EQ(device_count(DeviceType::HIP), 0);
  try {
    backend(Device("hip:0"));
    ADD_FAILURE() << "backend(hip:0) did not throw although HIP is unavailable";
  } catch (const DeviceUnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
#if defined(STRATA_TEST_HIP_PLUGIN)
  // The plugin was built, so it loaded: the reason is the HIP runtime's, not a missing file.
  EXPECT_NE(reason.find("hipGetDeviceCount"), std::string::npos) << reason;
#endif
}

TEST(HipPlugin, IsBuiltWhereHipccWasFoundAndDeclinesWithoutAnAmdGpu) {
  const auto path = testing::find_plugin(DeviceType::HIP);
#if defined(STRATA_TEST_HIP_PLUGIN)
  ASSERT_FALSE(path.empty()) << "this build compiled the HIP plugin, but " << plugin_file(DeviceType::HIP)
                             << " is not beside libstrata";
#else
  if (path.empty()) GTEST_SKIP() << "HIP unavailable: this build has no HIP plugin (hipcc was not found)";
#endif
  const auto [created, why_not] = testing::call_entry_point(path);
  if (created == nullptr) {
    EXPECT_NE(why_not.find("HIP"), std::string::npos) << why_not;
    EXPECT_EQ(why_not.find('\n'), std::string::npos) << why_not;
    EXPECT_FALSE(machine_has_amd_gpu()) << "the plugin declined on a machine with an AMD GPU: " << why_not;
  } else {
    EXPECT_TRUE(why_not.empty()) << why_not;
    EXPECT_EQ(created->type(), DeviceType::HIP);
    EXPECT_GE(created->device_count(), 1);
  }
}

TEST(HipPlugin, SupportsNothingWhileUnavailable) {
  if (machine_has_amd_gpu()) GTEST_SKIP() << "this machine has an AMD GPU";
  // The plugin registers its kernels when it is opened, even when it then declines (no device); they cannot run,
  // so callers asking first are told no rather than finding out at the call.
  EXPECT_FALSE(supports(DeviceType::HIP, "add"));
  EXPECT_FALSE(supports(DeviceType::HIP, "gemm"));
}

}  // namespace
}  // namespace strata
