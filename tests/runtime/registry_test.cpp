#include "strata/runtime/registry.h"

#include <gtest/gtest.h>

#include "strata/core/error.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/stream.h"

namespace strata {
namespace {

TEST(Registry, CpuBackendIsAlwaysThere) {
  EXPECT_NE(find_backend(DeviceType::CPU), nullptr);
  EXPECT_EQ(device_count(DeviceType::CPU), 1);
  EXPECT_TRUE(unavailable_reason(DeviceType::CPU).empty());
  const DeviceProperties p = backend(kCPU).properties(0);
  EXPECT_GT(p.total_memory, 0u);
  EXPECT_GE(p.multiprocessor_count, 1);
}

TEST(Registry, CudaIsEitherAvailableOrSaysWhyNot) {
  if (cuda::is_available()) {
    EXPECT_TRUE(cuda::unavailable_reason().empty());
    EXPECT_GE(cuda::device_count(), 1);
  } else {
    EXPECT_FALSE(cuda::unavailable_reason().empty());
    EXPECT_EQ(cuda::device_count(), 0);
  }
}

TEST(Registry, UsingAnAbsentDeviceNamesItAndTheReason) {
  for (const auto& use : {+[] { check_device(Device("cuda:99")); }, +[] { Stream::create(Device("cuda:99")); },
                          +[] { allocate(Device("cuda:99"), 1024); }}) {
    try {
      use();
      FAIL() << "no error";
    } catch (const DeviceUnavailableError& e) {
      EXPECT_NE(std::string(e.what()).find("cuda:99"), std::string::npos) << e.what();
    }
  }
}

TEST(Registry, ResolveKeepsCpuAndFillsConcreteIndices) {
  EXPECT_EQ(resolve(kCPU), kCPU);
  EXPECT_EQ(resolve(Device("cuda:3")), Device("cuda:3"));
}

}  // namespace
}  // namespace strata
