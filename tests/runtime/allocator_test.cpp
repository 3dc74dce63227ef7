// The caching allocator's bookkeeping on a test resource: rounding, pools, splitting, coalescing, streams,
// statistics, threads; and the real CPU device path. Out-of-memory and limits are in allocator_oom_test.cpp.
#include "strata/runtime/allocator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "runtime/test_memory_resource.h"
#include "strata/core/error.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/stream.h"

namespace strata {
namespace {

using testing::stream_a;
using testing::stream_b;
using testing::TestAllocator;

constexpr std::size_t kKiB = std::size_t{1} << 10;
constexpr std::size_t kMiB = std::size_t{1} << 20;

char* bytes_of(const DataPtr& p) { return static_cast<char*>(p.get()); }

TEST(CachingAllocator, ZeroBytesGiveAnEmptyDataPtr) {
  TestAllocator t;
  DataPtr p = t.allocator.allocate(0);
  EXPECT_FALSE(p);
  EXPECT_EQ(p.get(), nullptr);
  EXPECT_EQ(t.allocator.stats().allocated_blocks.current, 0);
  EXPECT_EQ(t.resource->counters().allocations, 0);
}

TEST(CachingAllocator, SizesAreRoundedTo512Bytes) {
  TestAllocator t;
  DataPtr one = t.allocator.allocate(1);
  EXPECT_EQ(one.size(), 1u);
  EXPECT_EQ(one.device(), Device(DeviceType::CUDA, 0));
  EXPECT_EQ(t.allocator.stats().allocated_bytes.current, 512);
  EXPECT_EQ(t.allocator.stats().requested_bytes, 1);
  DataPtr more = t.allocator.allocate(513);
  EXPECT_EQ(t.allocator.stats().allocated_bytes.current, 512 + 1024);
  EXPECT_EQ(t.allocator.stats().requested_bytes, 1 + 513);
  // Consecutive small blocks are carved from one segment, each on a 512-byte granule.
  EXPECT_EQ(bytes_of(more) - bytes_of(one), 512);
}

TEST(CachingAllocator, SmallRequestsShareTwoMiBSegments) {
  TestAllocator t;
  std::vector<DataPtr> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(t.allocator.allocate(256 * kKiB));
  const MemoryStats s = t.allocator.stats();
  EXPECT_EQ(s.backend_allocations, 1);
  EXPECT_EQ(s.reserved_bytes.current, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(s.allocated_blocks.current, 4);
  EXPECT_EQ(t.allocator.largest_free_block(), kMiB);
}

TEST(CachingAllocator, LargeSegmentsAreSizedByRequest) {
  // Each on its own stream, so that none is carved out of another's segment.
  TestAllocator t;
  DataPtr a = t.allocator.allocate(kMiB + 1, stream_a());  // large pool, under 10 MiB: a 20 MiB segment
  EXPECT_EQ(t.allocator.stats().reserved_bytes.current, static_cast<int64_t>(20 * kMiB));
  DataPtr b = t.allocator.allocate(10 * kMiB, stream_b());  // from 10 MiB on: the request rounded to 2 MiB
  EXPECT_EQ(t.allocator.stats().reserved_bytes.current, static_cast<int64_t>(30 * kMiB));
  DataPtr c = t.allocator.allocate(11 * kMiB + 1);
  EXPECT_EQ(t.allocator.stats().reserved_bytes.current, static_cast<int64_t>(42 * kMiB));
  EXPECT_EQ(t.allocator.stats().backend_allocations, 3);
}

TEST(CachingAllocator, FreedBlockIsReused) {
  TestAllocator t;
  DataPtr p = t.allocator.allocate(4 * kKiB);
  void* first = p.get();
  p.reset();
  EXPECT_EQ(t.allocator.stats().allocated_bytes.current, 0);
  EXPECT_EQ(t.allocator.stats().reserved_bytes.current, static_cast<int64_t>(2 * kMiB));  // still cached
  DataPtr again = t.allocator.allocate(4 * kKiB);
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(t.allocator.stats().backend_allocations, 1);
}

TEST(CachingAllocator, FreedNeighboursAreMerged) {
  TestAllocator t;
  DataPtr a = t.allocator.allocate(512 * kKiB);
  DataPtr b = t.allocator.allocate(512 * kKiB);
  DataPtr c = t.allocator.allocate(512 * kKiB);
  EXPECT_EQ(t.allocator.largest_free_block(), 512 * kKiB);  // the tail of the 2 MiB segment
  void* a_ptr = a.get();
  b.reset();
  EXPECT_EQ(t.allocator.largest_free_block(), 512 * kKiB);
  a.reset();  // merges with b
  EXPECT_EQ(t.allocator.largest_free_block(), kMiB);
  DataPtr big = t.allocator.allocate(kMiB);  // fits only in the merged a+b
  EXPECT_EQ(big.get(), a_ptr);
  big.reset();
  c.reset();  // merges with a+b on the left and the tail on the right: the whole segment
  EXPECT_EQ(t.allocator.largest_free_block(), 2 * kMiB);
  t.allocator.empty_cache();  // only whole segments go back, so this proves the merge
  EXPECT_EQ(t.allocator.stats().reserved_bytes.current, 0);
  EXPECT_EQ(t.resource->counters().frees, 1);
}

// Note [Recently freed blocks]: freed blocks may wait unmerged for a request of their size, but a request of
// another size sees them merged, without asking the backend for more.
TEST(CachingAllocator, RecentlyFreedBlocksAreMergedForARequestOfAnotherSize) {
  TestAllocator t;
  DataPtr a = t.allocator.allocate(512 * kKiB);
  DataPtr b = t.allocator.allocate(512 * kKiB);
  DataPtr c = t.allocator.allocate(512 * kKiB);
  void* a_ptr = a.get();
  a.reset();
  b.reset();
  DataPtr big = t.allocator.allocate(kMiB);  // the 512 KiB tail is too small; only a+b merged fits
  EXPECT_EQ(big.get(), a_ptr);
  EXPECT_EQ(t.allocator.stats().backend_allocations, 1);
  EXPECT_EQ(t.allocator.stats().allocated_bytes.current, static_cast<int64_t>(kMiB + 512 * kKiB));
}

TEST(CachingAllocator, LargeBlocksAreSplitOnlyForBigRests) {
  TestAllocator t;
  DataPtr a = t.allocator.allocate(4 * kMiB);  // 20 MiB segment, split: 16 MiB stays cached
  EXPECT_EQ(t.allocator.largest_free_block(), 16 * kMiB);
  EXPECT_EQ(t.allocator.stats().active_bytes.current, static_cast<int64_t>(4 * kMiB));
  DataPtr b = t.allocator.allocate(15 * kMiB + 512 * kKiB);  // rest of 512 KiB: not split, stays with the block
  EXPECT_EQ(t.allocator.stats().backend_allocations, 1);
  EXPECT_EQ(t.allocator.largest_free_block(), 0u);
  EXPECT_EQ(t.allocator.stats().allocated_bytes.current, static_cast<int64_t>(19 * kMiB + 512 * kKiB));
  EXPECT_EQ(t.allocator.stats().active_bytes.current, static_cast<int64_t>(20 * kMiB));
  b.reset();
  a.reset();
  EXPECT_EQ(t.allocator.largest_free_block(), 20 * kMiB);
  EXPECT_EQ(t.allocator.stats().active_bytes.current, 0);
}

TEST(CachingAllocator, BlocksAreReusedOnlyOnTheirStream) {
  TestAllocator t;
  // Both directions, since cached blocks are ordered by stream: a lookup may land on the next stream's block.
  for (const auto& [freed_on, wanted_on] : {std::pair{stream_a(), stream_b()}, std::pair{stream_b(), stream_a()}}) {
    DataPtr first = t.allocator.allocate(kKiB, freed_on);
    void* first_ptr = first.get();
    first.reset();
    const int64_t segments = t.allocator.stats().backend_allocations;
    DataPtr other = t.allocator.allocate(kKiB, wanted_on);  // must not get the block cached for `freed_on`
    EXPECT_NE(other.get(), first_ptr);
    EXPECT_EQ(t.allocator.stats().backend_allocations, segments + 1);
    DataPtr again = t.allocator.allocate(kKiB, freed_on);
    EXPECT_EQ(again.get(), first_ptr);
    EXPECT_EQ(t.allocator.stats().backend_allocations, segments + 1);
    other.reset();
    again.reset();
    t.allocator.empty_cache();  // the next round starts with nothing cached
    ASSERT_EQ(t.allocator.stats().reserved_bytes.current, 0);
  }
}

TEST(CachingAllocator, EmptyCacheReturnsEverythingUnused) {
  TestAllocator t;
  {
    DataPtr small = t.allocator.allocate(100);
    DataPtr large = t.allocator.allocate(30 * kMiB, stream_b());
  }
  DataPtr kept = t.allocator.allocate(3 * kMiB);
  t.allocator.empty_cache();
  MemoryStats s = t.allocator.stats();
  EXPECT_EQ(s.reserved_bytes.current, static_cast<int64_t>(20 * kMiB));  // the segment of `kept` stays
  EXPECT_EQ(s.reserved_segments.current, 1);
  kept.reset();
  t.allocator.empty_cache();
  s = t.allocator.stats();
  EXPECT_EQ(s.reserved_bytes.current, 0);
  EXPECT_EQ(s.backend_allocations, s.backend_frees);
  EXPECT_EQ(t.resource->counters().used, 0u);
  EXPECT_EQ(t.resource->counters().bad_frees, 0);
}

TEST(CachingAllocator, StatisticsTrackCurrentPeakAndTotal) {
  TestAllocator t;
  {
    DataPtr a = t.allocator.allocate(kMiB);
    DataPtr b = t.allocator.allocate(kMiB);
  }
  DataPtr c = t.allocator.allocate(512 * kKiB);
  MemoryStats s = t.allocator.stats();
  EXPECT_EQ(s.allocated_bytes.current, static_cast<int64_t>(512 * kKiB));
  EXPECT_EQ(s.allocated_bytes.peak, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(s.allocated_bytes.total, static_cast<int64_t>(2 * kMiB + 512 * kKiB));
  EXPECT_EQ(s.allocated_blocks.total, 3);
  EXPECT_EQ(s.active_blocks.peak, 2);
  t.allocator.reset_peak_stats();
  s = t.allocator.stats();
  EXPECT_EQ(s.allocated_bytes.peak, static_cast<int64_t>(512 * kKiB));
  EXPECT_EQ(s.active_blocks.peak, 1);
  EXPECT_EQ(s.reserved_bytes.peak, s.reserved_bytes.current);
  EXPECT_EQ(s.allocated_bytes.total, static_cast<int64_t>(2 * kMiB + 512 * kKiB));  // totals are kept
}

TEST(CachingAllocator, SummaryShowsTheFigures) {
  TestAllocator t;
  DataPtr a = t.allocator.allocate(3 * kMiB);
  DataPtr b = t.allocator.allocate(1536);
  t.allocator.set_limit(512 * kMiB);
  const std::string summary = t.allocator.summary();
  EXPECT_NE(summary.find("cuda:0"), std::string::npos) << summary;
  EXPECT_NE(summary.find("3.00 MiB"), std::string::npos) << summary;   // allocated: 3 MiB + 1.5 KiB
  EXPECT_NE(summary.find("22.00 MiB"), std::string::npos) << summary;  // reserved: 20 MiB + 2 MiB
  EXPECT_NE(summary.find("17.00 MiB"), std::string::npos) << summary;  // largest free block
  EXPECT_NE(summary.find("Backend allocations: 2"), std::string::npos) << summary;
  EXPECT_NE(summary.find("512.00 MiB"), std::string::npos) << summary;  // the limit
  EXPECT_NE(summary.find("Reserved segments"), std::string::npos) << summary;
}

TEST(CachingAllocator, DataPtrMovesOwnership) {
  TestAllocator t;
  DataPtr a = t.allocator.allocate(kKiB);
  void* ptr = a.get();
  DataPtr b(std::move(a));
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(b.get(), ptr);
  DataPtr c = t.allocator.allocate(kKiB);
  c = std::move(b);  // releases c's old block
  EXPECT_EQ(c.get(), ptr);
  EXPECT_EQ(t.allocator.stats().allocated_blocks.current, 1);
}

TEST(CachingAllocator, ThreadsAllocatingConcurrentlyLeaveNoTrace) {
  TestAllocator t(512 * kMiB, /*backed=*/true);
  constexpr int kThreads = 4;
  constexpr int kSteps = 2000;
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back([&, id] {
      std::mt19937 rng(1234 + id);
      std::uniform_int_distribution<int> log_size(0, 24);  // 1 B .. 16 MiB, skewed to small
      std::vector<DataPtr> held;
      const NativeStream stream = id % 2 == 0 ? stream_a() : stream_b();
      for (int step = 0; step < kSteps; ++step) {
        if (held.size() < 16 && rng() % 3 != 0) {
          const std::size_t bytes = (std::size_t{1} << log_size(rng)) + rng() % 1000;
          DataPtr p = t.allocator.allocate(bytes, stream);
          // Mark both ends: a block handed to two owners at once would be overwritten by the other.
          bytes_of(p)[0] = static_cast<char>(id);
          bytes_of(p)[bytes - 1] = static_cast<char>(id);
          held.push_back(std::move(p));
        } else if (!held.empty()) {
          const std::size_t victim = rng() % held.size();
          const DataPtr& p = held[victim];
          if (bytes_of(p)[0] != static_cast<char>(id) || bytes_of(p)[p.size() - 1] != static_cast<char>(id)) {
            ++corrupted;
          }
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(victim));
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(corrupted.load(), 0);
  MemoryStats s = t.allocator.stats();
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.allocated_blocks.current, 0);
  EXPECT_EQ(s.active_bytes.current, 0);
  EXPECT_EQ(s.active_blocks.current, 0);
  EXPECT_EQ(s.requested_bytes, 0);
  EXPECT_GT(s.allocated_blocks.total, kThreads * kSteps / 3);
  t.allocator.empty_cache();
  s = t.allocator.stats();
  EXPECT_EQ(s.reserved_bytes.current, 0);
  EXPECT_EQ(s.reserved_segments.current, 0);
  EXPECT_EQ(s.backend_allocations, s.backend_frees);
  EXPECT_EQ(t.resource->counters().bad_frees, 0);
  EXPECT_EQ(t.resource->counters().used, 0u);
}

// The real path: allocate() on the CPU device goes through the CPU backend's raw memory.
TEST(DeviceAllocator, CpuMemoryGoesThroughTheCachingAllocator) {
  CachingAllocator& cpu = allocator(kCPU);
  EXPECT_EQ(&cpu, &allocator(Device("cpu")));
  EXPECT_EQ(cpu.device(), kCPU);
  const MemoryStats before = memory_stats(kCPU);
  {
    DataPtr small = allocate(kCPU, 1000);
    DataPtr large = allocate(kCPU, 24 * kMiB);  // mmap'ed by the backend
    ASSERT_TRUE(small);
    ASSERT_TRUE(large);
    EXPECT_EQ(large.device(), kCPU);
    std::memset(small.get(), 1, 1000);
    std::memset(large.get(), 2, 24 * kMiB);
    const MemoryStats during = memory_stats(kCPU);
    EXPECT_EQ(during.allocated_bytes.current - before.allocated_bytes.current, static_cast<int64_t>(24 * kMiB + 1024));
    EXPECT_GE(during.reserved_bytes.current, during.allocated_bytes.current);
  }
  EXPECT_FALSE(allocate(kCPU, 0));
  EXPECT_EQ(memory_stats(kCPU).allocated_bytes.current, before.allocated_bytes.current);
  reset_peak_stats(kCPU);
  EXPECT_EQ(memory_stats(kCPU).allocated_bytes.peak, before.allocated_bytes.current);
  empty_cache(kCPU);
  const MemoryStats after = memory_stats(kCPU);
  EXPECT_GT(after.backend_frees, before.backend_frees);
  EXPECT_NE(memory_summary(kCPU).find("device: cpu"), std::string::npos);
}

TEST(DeviceAllocator, CpuAllocationsUseTheCurrentStream) {
  const Stream side = Stream::create(kCPU);
  DataPtr on_default = allocate(kCPU, 4 * kKiB);
  void* default_ptr = on_default.get();
  on_default.reset();
  StreamGuard guard(side);
  DataPtr on_side = allocate(kCPU, 4 * kKiB);  // the block cached for the default stream is not handed over
  EXPECT_NE(on_side.get(), default_ptr);
}

TEST(DeviceAllocator, AbsentCudaDeviceIsUnavailable) {
  // Without a GPU every CUDA device is absent; with one, the first index past the last device is.
  const int absent = cuda::is_available() ? cuda::device_count() : 0;
  EXPECT_THROW(allocator(Device(DeviceType::CUDA, absent)), DeviceUnavailableError);
  if (!cuda::is_available()) {
    EXPECT_THROW(allocate(Device("cuda"), 16), DeviceUnavailableError);
  }
}

}  // namespace
}  // namespace strata
