// Out of memory, limits and retries of the caching allocator, on a test resource of chosen capacity, and the
// per-device limit API on the CPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "runtime/test_memory_resource.h"
#include "strata/core/error.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/transfer.h"
#include "strata/runtime/op_scope.h"

namespace strata {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using testing::stream_a;
using testing::stream_b;
using testing::TestAllocator;

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

// The message of the OutOfMemoryError that `allocate` throws; fails the test when it throws nothing.
template <typename F>
std::string oom_message(F&& allocate) {
  try {
    allocate();
  } catch (const OutOfMemoryError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no OutOfMemoryError was thrown";
  return {};
}

const auto kLimitHint = HasSubstr("STRATA_MEMORY_LIMIT");
const auto kFragmentationHint = HasSubstr("fragmented");
const auto kShortageHint = HasSubstr("free the tensors you no longer need");

TEST(OutOfMemory, ShortageSaysWhatIsHeldAndSuggestsFreeingTensors) {
  TestAllocator t(64 * kMiB);
  DataPtr held = t.allocator.allocate(40 * kMiB);
  const std::string message = oom_message([&] { t.allocator.allocate(30 * kMiB, nullptr, "add"); });
  EXPECT_THAT(message, StartsWith("add: could not allocate 30.00 MiB on cuda:0."));
  EXPECT_THAT(message, HasSubstr("64.00 MiB in total, of which 24.00 MiB is free"));
  EXPECT_THAT(message, HasSubstr("40.00 MiB allocated and 40.00 MiB reserved"));
  EXPECT_THAT(message, HasSubstr("largest free cached block is 0 B"));
  EXPECT_THAT(message, AllOf(kShortageHint, HasSubstr("reduce the batch size")));
  EXPECT_THAT(message, AllOf(Not(kLimitHint), Not(kFragmentationHint), Not(HasSubstr("memory limit"))));
  EXPECT_EQ(t.allocator.stats().oom_count, 1);
}

TEST(OutOfMemory, FragmentationSuggestsEmptyCacheOrSmallerBatches) {
  TestAllocator t(64 * kMiB);
  std::vector<DataPtr> blocks;
  for (int i = 0; i < 30; ++i) blocks.push_back(t.allocator.allocate(2 * kMiB));  // three 20 MiB segments
  for (std::size_t i = 0; i < blocks.size(); i += 2) blocks[i].reset();           // every other block freed
  ASSERT_EQ(t.allocator.largest_free_block(), 2 * kMiB);
  const std::string message = oom_message([&] { t.allocator.allocate(8 * kMiB, nullptr, "conv2d"); });
  EXPECT_THAT(message, StartsWith("conv2d: could not allocate 8.00 MiB on cuda:0."));
  EXPECT_THAT(message, HasSubstr("30.00 MiB allocated and 60.00 MiB reserved"));
  EXPECT_THAT(message, HasSubstr("30.00 MiB is reserved but unallocated"));
  EXPECT_THAT(message, HasSubstr("the largest is 2.00 MiB"));
  EXPECT_THAT(message, AllOf(kFragmentationHint, HasSubstr("empty_cache()"), HasSubstr("smaller batches")));
  EXPECT_THAT(message, AllOf(Not(kLimitHint), Not(kShortageHint)));
}

TEST(OutOfMemory, LimitSaysHowToRaiseIt) {
  TestAllocator t(kGiB);
  t.allocator.set_limit(32 * kMiB);
  const std::string message = oom_message([&] { t.allocator.allocate(40 * kMiB, nullptr, "matmul"); });
  EXPECT_THAT(message, StartsWith("matmul: could not allocate 40.00 MiB on cuda:0."));
  EXPECT_THAT(message, HasSubstr("1.00 GiB in total, of which 1.00 GiB is free"));
  EXPECT_THAT(message, HasSubstr("the memory limit of cuda:0 is 32.00 MiB"));
  EXPECT_THAT(message, AllOf(kLimitHint, HasSubstr("set_memory_limit()"), HasSubstr("clear_memory_limit()")));
  EXPECT_THAT(message, HasSubstr("STRATA_MEMORY_LIMIT=cuda:0=40MiB is what this request needs"));
  // The figure is this request's alone: a training run that fails at one step needs more at the next.
  EXPECT_THAT(message, HasSubstr("will need more"));
  EXPECT_THAT(message, AllOf(Not(kFragmentationHint), Not(kShortageHint)));
}

TEST(OutOfMemory, NamesTheRunningOpOrSaysAllocation) {
  TestAllocator t(16 * kMiB);
  EXPECT_THAT(oom_message([&] { t.allocator.allocate(32 * kMiB); }), StartsWith("allocation: could not allocate"));
  OpScope scope("softmax");
  EXPECT_THAT(oom_message([&] { t.allocator.allocate(32 * kMiB); }), StartsWith("softmax: could not allocate"));
}

TEST(OutOfMemory, RequestLargerThanTheDeviceSaysSo) {
  TestAllocator t(kGiB);
  const std::string message = oom_message([&] { t.allocator.allocate(2 * kGiB, nullptr, "add"); });
  EXPECT_THAT(message, StartsWith("add: could not allocate 2.00 GiB on cuda:0."));
  EXPECT_THAT(message, HasSubstr("larger than all of cuda:0's memory"));
  EXPECT_THAT(oom_message([&] { t.allocator.allocate(std::numeric_limits<std::size_t>::max()); }),
              HasSubstr("could not allocate"));
}

TEST(OutOfMemory, LimitIsCheckedBeforeAskingTheBackend) {
  TestAllocator t(kGiB);
  t.allocator.set_limit(30 * kMiB);
  DataPtr first = t.allocator.allocate(20 * kMiB);
  EXPECT_THROW(t.allocator.allocate(12 * kMiB), OutOfMemoryError);
  const auto counters = t.resource->counters();
  EXPECT_EQ(counters.allocations, 1);
  EXPECT_EQ(counters.failed_allocations, 0);  // the backend was never asked for the refused segment
  EXPECT_EQ(t.allocator.stats().reserved_bytes.current, static_cast<int64_t>(20 * kMiB));
  EXPECT_EQ(t.allocator.stats().limit_bytes, static_cast<int64_t>(30 * kMiB));
}

TEST(OutOfMemory, LimitFreesCachedSegmentsBeforeFailing) {
  TestAllocator t(kGiB);
  t.allocator.set_limit(30 * kMiB);
  t.allocator.allocate(20 * kMiB, stream_a()).reset();  // cached, but only for stream A
  DataPtr on_b = t.allocator.allocate(24 * kMiB, stream_b());
  EXPECT_TRUE(on_b);
  const MemoryStats s = t.allocator.stats();
  EXPECT_EQ(s.retries, 1);
  EXPECT_EQ(s.backend_frees, 1);
  EXPECT_EQ(s.reserved_bytes.current, static_cast<int64_t>(24 * kMiB));
}

TEST(OutOfMemory, SegmentShrinksToFitUnderATightLimit) {
  TestAllocator t(kGiB);
  t.allocator.set_limit(kMiB);  // smaller than a 2 MiB small-pool segment
  DataPtr a = t.allocator.allocate(1000);
  DataPtr b = t.allocator.allocate(1000);
  EXPECT_EQ(t.allocator.stats().reserved_bytes.current, 2048);
  EXPECT_THROW(t.allocator.allocate(kMiB), OutOfMemoryError);
  t.allocator.set_limit(std::nullopt);
  EXPECT_EQ(t.allocator.limit(), std::nullopt);
  EXPECT_TRUE(t.allocator.allocate(kMiB));
}

TEST(OutOfMemory, DeviceWithoutRoomForAFullSegmentStillServesTheRequest) {
  TestAllocator t(16 * kMiB);
  DataPtr p = t.allocator.allocate(3 * kMiB);  // the usual 20 MiB segment does not fit
  EXPECT_TRUE(p);
  EXPECT_EQ(t.allocator.stats().reserved_bytes.current, static_cast<int64_t>(3 * kMiB));
}

TEST(OutOfMemory, BackendFailureIsRetriedAfterReleasingTheCache) {
  TestAllocator t(40 * kMiB);
  t.allocator.allocate(12 * kMiB, stream_a()).reset();
  DataPtr big = t.allocator.allocate(30 * kMiB, stream_b());  // 12 + 30 > 40 until the cache is released
  EXPECT_TRUE(big);
  const MemoryStats s = t.allocator.stats();
  EXPECT_EQ(s.retries, 1);
  EXPECT_EQ(s.oom_count, 0);
  EXPECT_EQ(s.backend_frees, 1);
  EXPECT_EQ(t.resource->counters().failed_allocations, 1);
}

TEST(OutOfMemory, FreeingAfterTheErrorLetsTheRetrySucceed) {
  TestAllocator t(64 * kMiB);
  std::vector<DataPtr> held;
  for (int i = 0; i < 3; ++i) held.push_back(t.allocator.allocate(20 * kMiB));
  EXPECT_THROW(t.allocator.allocate(20 * kMiB), OutOfMemoryError);
  held.clear();  // cached now; the allocator returns them to the device itself when it needs the room
  DataPtr retry = t.allocator.allocate(50 * kMiB);
  EXPECT_TRUE(retry);
  const MemoryStats s = t.allocator.stats();
  EXPECT_EQ(s.oom_count, 1);
  EXPECT_EQ(s.retries, 1);
  EXPECT_EQ(s.allocated_bytes.current, static_cast<int64_t>(50 * kMiB));
  EXPECT_EQ(t.resource->counters().bad_frees, 0);
}

// Clears the CPU limit however the test ends, so that other tests see the usual allocator.
struct CpuLimitReset {
  ~CpuLimitReset() { clear_memory_limit(kCPU); }
};

TEST(DeviceMemoryLimit, CpuLimitByBytesAndFraction) {
  CpuLimitReset reset;
  empty_cache(kCPU);
  const auto reserved = static_cast<std::size_t>(memory_stats(kCPU).reserved_bytes.current);
  set_memory_limit(kCPU, reserved + 8 * kMiB);
  EXPECT_EQ(memory_stats(kCPU).limit_bytes, static_cast<int64_t>(reserved + 8 * kMiB));
  const std::string message = oom_message([] { allocate(kCPU, 64 * kMiB); });
  EXPECT_THAT(message, AllOf(HasSubstr("could not allocate 64.00 MiB on cpu"), kLimitHint));
  clear_memory_limit(kCPU);
  EXPECT_EQ(memory_stats(kCPU).limit_bytes, std::nullopt);
  EXPECT_TRUE(allocate(kCPU, 64 * kMiB));

  const std::size_t total = backend(kCPU).memory_info(0).total;
  set_memory_fraction(kCPU, 0.5);
  EXPECT_EQ(allocator(kCPU).limit(), total / 2);
  EXPECT_THROW(set_memory_fraction(kCPU, 0.0), InvalidArgumentError);
  EXPECT_THROW(set_memory_fraction(kCPU, 1.5), InvalidArgumentError);
}

}  // namespace
}  // namespace strata
