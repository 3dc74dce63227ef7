#include "strata/runtime/transfer.h"
#include "strata/runtime/sync_debug.h"
#include "strata/runtime/op_scope.h"

#include <gtest/gtest.h>

#include <vector>

#include "strata/core/error.h"

namespace strata {
namespace {

class SyncDebug : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = sync_debug_mode(); }
  void TearDown() override { set_sync_debug_mode(saved_); }
  SyncDebugMode saved_ = SyncDebugMode::Off;
};

TEST_F(SyncDebug, GpuSynchronisationsAreCounted) {
  reset_transfer_counters();
  // Counting needs no GPU: it is what every GPU wait reports.
  note_synchronization(Device("cuda:0"), "item");
  note_synchronization(Device("cuda:0"), "item");
  EXPECT_EQ(transfer_counters().synchronizations, 2);
}

TEST_F(SyncDebug, CpuWaitsAreNotCounted) {
  reset_transfer_counters();
  note_synchronization(kCPU, "item");
  EXPECT_EQ(transfer_counters().synchronizations, 0);
}

TEST_F(SyncDebug, ErrorModeRefusesAndNamesTheCall) {
  set_sync_debug_mode(SyncDebugMode::Error);
  try {
    note_synchronization(Device("cuda:0"), "item");
    FAIL() << "no error";
  } catch (const SyncDebugError& e) {
    EXPECT_NE(std::string(e.what()).find("item"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos);
  }
}

TEST_F(SyncDebug, WarnModeWarnsOnStderr) {
  set_sync_debug_mode(SyncDebugMode::Warn);
  ::testing::internal::CaptureStderr();
  note_synchronization(Device("cuda:0"), "to(cpu)");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("to(cpu)"), std::string::npos) << err;
}

TEST(Transfer, HostToHostCopiesAreNotCounted) {
  reset_transfer_counters();
  std::vector<int> a{1, 2, 3}, b(3);
  copy_bytes(b.data(), kCPU, a.data(), kCPU, sizeof(int) * 3, nullptr, true);
  EXPECT_EQ(b, a);
  const auto c = transfer_counters();
  EXPECT_EQ(c.host_to_device_copies + c.device_to_host_copies + c.device_to_device_copies, 0);
}

TEST(Transfer, OpScopeNamesTheRunningOp) {
  EXPECT_EQ(current_op(), nullptr);
  {
    OpScope outer("matmul");
    EXPECT_STREQ(current_op(), "matmul");
    {
      OpScope inner("add");
      EXPECT_STREQ(current_op(), "add");
    }
    EXPECT_STREQ(current_op(), "matmul");
  }
  EXPECT_EQ(current_op(), nullptr);
}

}  // namespace
}  // namespace strata
