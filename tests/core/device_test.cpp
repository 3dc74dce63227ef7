#include "strata/core/device.h"

#include <gtest/gtest.h>

#include <sstream>

#include "strata/core/error.h"

namespace strata {
namespace {

TEST(Device, ParsesAndPrintsEveryForm) {
  for (const char* text : {"cpu", "cpu:1", "cpu:63", "cuda", "cuda:1", "cuda:12"}) {
    std::ostringstream os;
    os << Device(text);
    EXPECT_EQ(os.str(), text);
  }
}

TEST(Device, CudaIndexIsKept) {
  const Device d("cuda:3");
  EXPECT_TRUE(d.is_cuda());
  EXPECT_EQ(d.index(), 3);
  EXPECT_FALSE(Device("cuda").has_index());
}

TEST(Device, CpuZeroIsAnAliasOfCpu) {
  EXPECT_EQ(Device("cpu:0"), kCPU);
  EXPECT_EQ(Device("cpu"), Device(DeviceType::CPU, 0));
  EXPECT_EQ(Device("cpu:0").str(), "cpu");
}

TEST(Device, EveryCpuDeviceHasAnIndex) {
  EXPECT_TRUE(kCPU.has_index());
  EXPECT_EQ(Device(DeviceType::CPU).index(), 0);
  EXPECT_EQ(Device(DeviceType::CPU, -1), kCPU);
  const Device second("cpu:1");
  EXPECT_TRUE(second.is_cpu());
  EXPECT_EQ(second.index(), 1);
  EXPECT_NE(second, kCPU);
  EXPECT_NE(std::hash<Device>{}(second), std::hash<Device>{}(kCPU));
}

TEST(Device, KCudaIsTheCurrentCudaDevice) {
  EXPECT_EQ(kCUDA, Device("cuda"));
  EXPECT_TRUE(kCUDA.is_cuda());
  EXPECT_FALSE(kCUDA.has_index());
  EXPECT_NE(kCUDA, Device("cuda:0"));
}

TEST(Device, BadStringsThrowNamingTheStringAndTheAcceptedForms) {
  for (const char* text : {"gpu0", "cuda:-1", "cuda:x", "cuda:", "", "CUDA", "cuda:1:2", "cpu:-1", "cpu:", "cpu:one"}) {
    try {
      Device d(text);
      ADD_FAILURE() << "no error for '" << text << "'";
    } catch (const InvalidArgumentError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(fmt::format("'{}'", text)), std::string::npos) << message;
      EXPECT_NE(message.find("'cuda:N'"), std::string::npos) << message;
    }
  }
}

TEST(Device, ErrorsDeriveFromStrataErrorAndStdException) {
  EXPECT_THROW(Device("tpu"), Error);
  EXPECT_THROW(Device("tpu"), std::exception);
}

TEST(Device, FormatsWithFmt) { EXPECT_EQ(fmt::format("{}", Device("cuda:2")), "cuda:2"); }

}  // namespace
}  // namespace strata
