#include "strata/kernels/launch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "strata/runtime/stream.h"

namespace strata {
namespace {

TEST(Launch, ForallVisitsEveryIndexOnceOnTheCpu) {
  for (int64_t n : {0L, 1L, 1000L, 200000L}) {
    std::vector<int> hits(static_cast<std::size_t>(n), 0);
    int* h = hits.data();
    kernels::forall(kernels::LaunchSite(kCPU, nullptr, "count", "test"), n, [=](int64_t i) { h[i] += 1; });
    EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), n);
  }
}

TEST(Launch, LaunchGivesThreadAndBlockIndicesLikeCuda) {
  // increment_by_one with explicit blocks and threads, as in the Numba tutorial.
  std::vector<float> values(1000, 1.0f);
  float* v = values.data();
  const int64_t n = static_cast<int64_t>(values.size());
  const std::uint32_t threads = 32, blocks = (n + threads - 1) / threads;
  kernels::launch(kernels::LaunchSite(kCPU, nullptr, "increment_by_one", "test"), {blocks}, {threads},
                  [=](const kernels::ThreadIndex& idx) {
                    const int64_t i = idx.global_x();
                    if (i < n) v[i] += 1;
                  });
  EXPECT_EQ(std::count(values.begin(), values.end(), 2.0f), n);
}

TEST(Launch, HostOnlyKernelOnAGpuSaysHowToFixIt) {
  // This file is compiled by g++, so its kernels cannot run on a GPU; the error must say so even when no GPU
  // exists (the device need not be present to be refused).
  try {
    kernels::forall(kernels::LaunchSite(Device("cuda:0"), nullptr, "square", "test"), 10, [](int64_t) {});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("compiled only for the host"), std::string::npos) << message;
    EXPECT_NE(message.find("nvcc"), std::string::npos) << message;
    EXPECT_NE(message.find("launch_test.cpp"), std::string::npos) << message;
  }
}

TEST(Launch, KernelAssertOnCpuThrowsOnceWithIndexAndValue) {
  const kernels::LaunchSite site(kCPU, nullptr, "check_positive", "test");
  const KernelAssertContext check = site.asserts("value must be positive");
  try {
    kernels::forall(site, 100000, [=](int64_t i) { STRATA_KERNEL_ASSERT(check, i < 5, i, i, 5); });
    FAIL() << "no error";
  } catch (const DeviceAssertError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("check_positive"), std::string::npos) << message;
    EXPECT_NE(message.find("value must be positive"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(synchronize(kCPU)) << "the failure is reported once";
}

TEST(Launch, AtomicAddFromManyThreads) {
  int64_t total = 0;
  float ftotal = 0;
  int64_t* t = &total;
  float* f = &ftotal;
  kernels::forall(kernels::LaunchSite(kCPU, nullptr, "sum", "test"), 100000, [=](int64_t) {
    kernels::atomic_add<int64_t>(t, 1);
    kernels::atomic_add<float>(f, 1.0f);
  });
  EXPECT_EQ(total, 100000);
  EXPECT_EQ(ftotal, 100000.0f);
}

}  // namespace
}  // namespace strata
