// Virtual CPU devices (Note [Virtual CPU devices]): the count, its errors, and what each device owns.
#include "strata/runtime/cpu_devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "strata/core/error.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/memory_limit.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(CpuDeviceCount, ParsesWholeNumbersUpToTheCap) {
  EXPECT_EQ(parse_cpu_device_count("1"), 1);
  EXPECT_EQ(parse_cpu_device_count("2"), 2);
  EXPECT_EQ(parse_cpu_device_count("64"), kMaxCpuDevices);
}

TEST(CpuDeviceCount, BadValuesAreErrorsNamingTheVariableAndTheValue) {
  for (const char* text : {"0", "-1", "65", "99999999999999999999", "two", "", "2.0", " 2", "2x"}) {
    try {
      parse_cpu_device_count(text);
      ADD_FAILURE() << "no error for '" << text << "'";
    } catch (const InvalidArgumentError& e) {
      EXPECT_THAT(e.what(), HasSubstr(fmt::format("STRATA_CPU_DEVICES='{}'", text)));
      EXPECT_THAT(e.what(), HasSubstr("from 1 to 64"));
    }
  }
}

TEST(CpuDeviceCount, AbsentDeviceSaysHowManyExistAndWhichVariableSetsThem) {
  const int count = cpu_device_count();
  const Device absent(DeviceType::CPU, count);
  try {
    check_device(absent);
    ADD_FAILURE() << "no error for " << absent;
  } catch (const DeviceUnavailableError& e) {
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("device cpu:{} is unavailable", count)));
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("{} CPU device(s)", count)));
    EXPECT_THAT(e.what(), HasSubstr("STRATA_CPU_DEVICES"));
  }
  EXPECT_THROW(zeros({2}, absent), DeviceUnavailableError);
  EXPECT_EQ(device_count(DeviceType::CPU), count);
}

TEST(CpuDeviceCount, ChangingItAfterTheFirstCpuAllocationIsRefused) {
  const Tensor held = ones({4});  // the count is fixed from here on, if it was not already
  const int count = cpu_device_count();
  try {
    set_cpu_device_count(count + 1);
    ADD_FAILURE() << "the count changed after an allocation";
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("before the first CPU allocation"));
  }
  EXPECT_EQ(cpu_device_count(), count);
  set_cpu_device_count(count);  // the same count is no change
  EXPECT_THROW(set_cpu_device_count(0), InvalidArgumentError);
  EXPECT_THROW(set_cpu_device_count(kMaxCpuDevices + 1), InvalidArgumentError);
}

// The count is read once per process, when the suites are listed (before main), so these run in a fresh process
// that inherits the variable: "threadsafe" death tests run the test binary again, with this environment.
class CpuDevicesEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const char* previous = std::getenv(kCpuDevicesVariable);
    previous_ = previous ? std::optional<std::string>(previous) : std::nullopt;
  }
  void TearDown() override {
    if (previous_) {
      setenv(kCpuDevicesVariable, previous_->c_str(), 1);
    } else {
      unsetenv(kCpuDevicesVariable);
    }
  }
  static void set_count_for_child(const char* value) { setenv(kCpuDevicesVariable, value, 1); }

 private:
  std::optional<std::string> previous_;
};

TEST_F(CpuDevicesEnvironment, TheVariableMakesDistinctDevices) {
  set_count_for_child("3");
  EXPECT_EXIT(
      {
        const bool three = device_count(DeviceType::CPU) == 3;
        const Tensor a = ones({4}, Device("cpu:2"));
        const bool placed = a.device() == Device(DeviceType::CPU, 2);
        const bool own_allocator = &allocator(Device("cpu:2")) != &allocator(kCPU);
        bool refused = false;
        try {
          (void)ones({1}, Device("cpu:3"));
        } catch (const DeviceUnavailableError& e) {
          refused = std::string(e.what()).find("3 CPU device(s)") != std::string::npos;
        }
        std::exit(three && placed && own_allocator && refused ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(CpuDevicesEnvironment, SetBeforeFirstUseOverridesTheVariable) {
  set_count_for_child("2");
  EXPECT_EXIT(
      {
        set_cpu_device_count(4);
        const bool four = cpu_device_count() == 4 && ones({1}, Device("cpu:3")).device().index() == 3;
        std::exit(four ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(CpuDevicesEnvironment, AMalformedCountFailsEveryUseOfTheCpu) {
  set_count_for_child("many");
  EXPECT_EXIT(
      {
        int named = 0;
        for (int attempt = 0; attempt < 2; ++attempt) {
          try {
            (void)ones({1});
          } catch (const InvalidArgumentError& e) {
            named += std::string(e.what()).find("STRATA_CPU_DEVICES='many'") != std::string::npos;
          }
        }
        std::exit(named == 2 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(CpuDevicesEnvironment, EachDeviceHasItsOwnLimitAndStatistics) {
  set_count_for_child("2");
  EXPECT_EXIT(
      {
        setenv(kMemoryLimitVariable, "cpu:1=64MiB", 1);
        const Device second("cpu:1");
        const bool limits = allocator(second).limit() == 64 * kMiB && !allocator(kCPU).limit();
        bool refused = false;
        try {
          (void)allocate(second, 128 * kMiB);
        } catch (const OutOfMemoryError& e) {
          refused = std::string(e.what()).find("cpu:1") != std::string::npos;
        }
        const DataPtr on_first = allocate(kCPU, 128 * kMiB);  // the limit is cpu:1's alone
        const int64_t before = memory_stats(second).allocated_bytes.current;
        const Tensor t = zeros({1024}, second);
        const bool counted = memory_stats(second).allocated_bytes.current - before == 4096;
        std::exit(limits && refused && on_first && counted ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(MemoryLimitOfCpuDevices, TheTypeAloneAppliesToEveryCpuDeviceWithoutItsOwnEntry) {
  const auto limits = parse_memory_limits("cpu=8GiB,cpu:1=1GiB");
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_TRUE(limits[0].whole_type);
  EXPECT_FALSE(limits[1].whole_type);
  EXPECT_EQ(find_memory_limit(limits, kCPU)->bytes, std::size_t{8} << 30);
  EXPECT_EQ(find_memory_limit(limits, Device("cpu:1"))->bytes, std::size_t{1} << 30);
  EXPECT_EQ(find_memory_limit(limits, Device("cpu:2"))->bytes, std::size_t{8} << 30);
  const auto first_only = parse_memory_limits("cpu:0=2GiB");
  EXPECT_EQ(find_memory_limit(first_only, kCPU)->bytes, std::size_t{2} << 30);
  EXPECT_FALSE(find_memory_limit(first_only, Device("cpu:1")));
  EXPECT_EQ(parse_memory_limits("cpu=1GiB,cpu:0=2GiB").size(), 2u);  // the type, and its first device
  EXPECT_THROW(parse_memory_limits("cpu:1=1GiB,cpu:1=2GiB"), InvalidArgumentError);
}

}  // namespace
}  // namespace strata
