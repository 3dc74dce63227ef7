// Device-side asserts: which synchronisation reports which stream's failure, and how launches find their site and
// slot (Note [Device-side asserts], Note [Assert sites and slots without a lock]). On the CPU a failure is recorded
// with report_assert, as a GPU kernel that the host has not waited for yet would leave it.
#include "strata/runtime/kernel_assert.h"

#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "strata/core/error.h"
#include "strata/kernels/launch.h"
#include "strata/runtime/stream.h"

namespace strata {
namespace {

/// Records a failure of `kernel` in the slot of `stream`, as its kernel would.
void record_failure(const Stream& stream, const char* kernel, int64_t index = 7) {
  const kernels::LaunchSite site(stream.device(), stream.native(), kernel, "test");
  kernels::report_assert(site.asserts("index out of range"), index, 42.0, 10.0);
}

/// The message of the DeviceAssertError that `sync` throws, or "" when it throws none.
template <typename Sync>
std::string reported_by(Sync sync) {
  try {
    sync();
  } catch (const DeviceAssertError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceAsserts, StreamSynchronizeLeavesAnotherStreamsFailureAlone) {
  const Stream a = Stream::create(kCPU), b = Stream::create(kCPU);
  record_failure(b, "kernel_on_b");
  EXPECT_EQ(reported_by([&] { a.synchronize(); }), "");
  EXPECT_EQ(assert_slot(kCPU, b.native())->failed, kAssertSlotRecorded) << "synchronising a cleared b's slot";
  const std::string message = reported_by([&] { b.synchronize(); });
  EXPECT_NE(message.find("kernel_on_b"), std::string::npos) << message;
  EXPECT_EQ(reported_by([&] { b.synchronize(); }), "") << "the failure is reported once";
}

TEST(DeviceAsserts, DeviceSynchronizeReportsAFailureOfAnyStream) {
  const Stream b = Stream::create(kCPU);
  record_failure(b, "kernel_on_b");
  const std::string message = reported_by([] { synchronize(kCPU); });
  EXPECT_NE(message.find("kernel_on_b"), std::string::npos) << message;
  EXPECT_NE(message.find("element 7, value 42"), std::string::npos) << message;
  EXPECT_EQ(reported_by([] { synchronize(kCPU); }), "");
  EXPECT_EQ(reported_by([&] { b.synchronize(); }), "") << "the device synchronisation cleared it";
}

TEST(DeviceAsserts, DeviceSynchronizeReportsEveryStreamsFailureInTurn) {
  const Stream a = Stream::create(kCPU), b = Stream::create(kCPU);
  record_failure(a, "kernel_on_a");
  record_failure(b, "kernel_on_b");
  const std::string first = reported_by([] { synchronize(kCPU); });
  const std::string second = reported_by([] { synchronize(kCPU); });
  EXPECT_NE((first + second).find("kernel_on_a"), std::string::npos) << first << " / " << second;
  EXPECT_NE((first + second).find("kernel_on_b"), std::string::npos) << first << " / " << second;
  EXPECT_EQ(reported_by([] { synchronize(kCPU); }), "");
}

TEST(DeviceAsserts, EventSynchronizeChecksTheStreamItWasRecordedOn) {
  const Stream a = Stream::create(kCPU), b = Stream::create(kCPU);
  Event on_a(kCPU);
  on_a.record(a);
  record_failure(b, "kernel_on_b");
  EXPECT_EQ(reported_by([&] { on_a.synchronize(); }), "");
  record_failure(a, "kernel_on_a");
  const std::string message = reported_by([&] { on_a.synchronize(); });
  EXPECT_NE(message.find("kernel_on_a"), std::string::npos) << message;
  EXPECT_NE(reported_by([&] { b.synchronize(); }).find("kernel_on_b"), std::string::npos);
}

TEST(DeviceAsserts, AMovedEventChecksTheStreamItWasRecordedOn) {
  const Stream a = Stream::create(kCPU);
  Event on_a(kCPU);
  on_a.record(a);
  const Event moved = std::move(on_a);
  record_failure(a, "kernel_on_a");
  EXPECT_NE(reported_by([&] { moved.synchronize(); }).find("kernel_on_a"), std::string::npos);
}

TEST(DeviceAsserts, ACpuLaunchReportsItsOwnStreamsFailureOnly) {
  const Stream a = Stream::create(kCPU), b = Stream::create(kCPU);
  record_failure(b, "kernel_on_b");
  const kernels::LaunchSite site(kCPU, a.native(), "kernel_on_a", "test");
  const KernelAssertContext check = site.asserts("value below 5");
  const std::string message =
      reported_by([&] { kernels::forall(site, 100, [=](int64_t i) { STRATA_KERNEL_ASSERT(check, i < 5, i, i, 5); }); });
  EXPECT_NE(message.find("kernel_on_a"), std::string::npos) << message;
  EXPECT_EQ(assert_slot(kCPU, b.native())->failed, kAssertSlotRecorded) << "the launch on a cleared b's slot";
  EXPECT_NE(reported_by([] { synchronize(kCPU); }).find("kernel_on_b"), std::string::npos);
}

TEST(DeviceAsserts, AFailureStillBeingWrittenIsLeftForTheNextCheck) {
  const Stream s = Stream::create(kCPU);
  DeviceAssertSlot* slot = assert_slot(kCPU, s.native());
  record_failure(s, "half_written");
  slot->failed = kAssertSlotWriting;  // as a kernel between taking the slot and finishing its report
  EXPECT_EQ(reported_by([&] { s.synchronize(); }), "");
  EXPECT_EQ(reported_by([] { synchronize(kCPU); }), "");
  EXPECT_EQ(slot->failed, kAssertSlotWriting) << "a check cleared a slot a kernel was still writing";
  slot->failed = kAssertSlotRecorded;
  EXPECT_NE(reported_by([&] { s.synchronize(); }).find("half_written"), std::string::npos);
}

TEST(DeviceAsserts, OnlyTheFirstFailureInASlotIsRecorded) {
  const Stream s = Stream::create(kCPU);
  record_failure(s, "first", 1);
  record_failure(s, "second", 2);
  const std::string message = reported_by([&] { s.synchronize(); });
  EXPECT_NE(message.find("first"), std::string::npos) << message;
  EXPECT_NE(message.find("element 1,"), std::string::npos) << message;
}

TEST(DeviceAsserts, AStreamKeepsOneSlotOnEveryThread) {
  const Stream a = Stream::create(kCPU), b = Stream::create(kCPU);
  DeviceAssertSlot* slot_a = assert_slot(kCPU, a.native());
  EXPECT_EQ(assert_slot(kCPU, a.native()), slot_a);
  EXPECT_NE(assert_slot(kCPU, b.native()), slot_a);
  DeviceAssertSlot* seen_elsewhere = nullptr;
  std::thread([&] { seen_elsewhere = assert_slot(kCPU, a.native()); }).join();
  EXPECT_EQ(seen_elsewhere, slot_a);
}

TEST(DeviceAsserts, ASlotOutlivesTheThreadsCacheOfIt) {
  // More streams than a thread caches: the first one's slot must come back unchanged from the registry.
  std::vector<Stream> streams;
  std::vector<DeviceAssertSlot*> slots;
  for (int i = 0; i < 16; ++i) {
    streams.push_back(Stream::create(kCPU));
    slots.push_back(assert_slot(kCPU, streams.back().native()));
  }
  for (int i = 0; i < 16; ++i) EXPECT_EQ(assert_slot(kCPU, streams[i].native()), slots[i]) << i;
}

TEST(DeviceAsserts, ASiteHasOneIdForOneText) {
  const auto where = std::source_location::current();
  const int id = register_assert_site("gather", "embedding", "index out of range", where);
  EXPECT_EQ(register_assert_site("gather", "embedding", "index out of range", where), id);
  // The same text at other addresses is the same site.
  const std::string kernel = "gather", op = "embedding";
  EXPECT_EQ(register_assert_site(kernel.c_str(), op.c_str(), "index out of range", where), id);
  EXPECT_NE(register_assert_site("gather", "cross_entropy", "index out of range", where), id);
  EXPECT_NE(register_assert_site("gather", "embedding", "index out of range", std::source_location::current()), id);
}

TEST(DeviceAsserts, AnOpNameReusingAnAddressGetsItsOwnSite) {
  // A runtime op name whose memory is reused for another name: the address alone must not decide the site.
  char op[32] = "first_op";
  const auto where = std::source_location::current();
  const int first = register_assert_site("gather", op, "index out of range", where);
  EXPECT_EQ(register_assert_site("gather", op, "index out of range", where), first);
  std::strcpy(op, "second_op");
  const int second = register_assert_site("gather", op, "index out of range", where);
  EXPECT_NE(second, first);
  EXPECT_EQ(register_assert_site("gather", op, "index out of range", where), second);

  const Stream s = Stream::create(kCPU);
  kernels::report_assert({assert_slot(kCPU, s.native()), second}, 3, 99.0, 10.0);
  const std::string message = reported_by([&] { s.synchronize(); });
  EXPECT_NE(message.find("of op 'second_op'"), std::string::npos) << message;
}

TEST(DeviceAsserts, ThreadsRegisteringTheSameSitesAgreeOnTheirIds) {
  const auto where = std::source_location::current();
  const char* const ops[] = {"op0", "op1", "op2", "op3", "op4", "op5", "op6", "op7"};
  constexpr int kThreads = 4, kRounds = 500;
  std::vector<std::vector<int>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        for (const char* op : ops) ids[t].push_back(register_assert_site("threaded", op, "message", where));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(ids[t], ids[0]) << "thread " << t;
  for (std::size_t i = 0; i < std::size(ops); ++i) {
    EXPECT_EQ(ids[0][i], register_assert_site("threaded", ops[i], "message", where));
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(ids[0][i], ids[0][j]);
  }
}

}  // namespace
}  // namespace strata
