// The per-thread lists of freed small objects (Note [Small objects are recycled per thread]), and tensors that
// are made on one thread and dropped on another.
#include "strata/runtime/thread_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "strata/strata.h"

namespace strata {
namespace {

struct Handle {
  int64_t words[4];
};

TEST(ThreadCacheAllocator, FreedBlockIsReusedOnItsThread) {
  if (!kThreadCacheEnabled) GTEST_SKIP() << "AddressSanitizer build: the lists are bypassed";
  ThreadCacheAllocator<Handle> allocator;
  Handle* first = allocator.allocate(1);
  allocator.deallocate(first, 1);
  Handle* again = allocator.allocate(1);
  EXPECT_EQ(again, first);
  allocator.deallocate(again, 1);
}

TEST(ThreadCacheAllocator, BlockFreedOnAnotherThreadIsReusedThere) {
  if (!kThreadCacheEnabled) GTEST_SKIP() << "AddressSanitizer build: the lists are bypassed";
  ThreadCacheAllocator<Handle> allocator;
  Handle* made_here = allocator.allocate(1);
  std::thread([&] {
    allocator.deallocate(made_here, 1);
    Handle* again = allocator.allocate(1);
    EXPECT_EQ(again, made_here);
    allocator.deallocate(again, 1);
  }).join();  // the thread's end returns its list to the heap (checked by the sanitizer and valgrind builds)
}

TEST(ThreadCacheAllocator, ArraysBypassTheLists) {
  ThreadCacheAllocator<Handle> allocator;
  Handle* many = allocator.allocate(3);
  many[2].words[3] = 7;
  allocator.deallocate(many, 3);
}

TEST(TensorHandles, TensorsOutliveTheThreadsThatMadeThemAndTheOtherWayRound) {
  std::vector<Tensor> made_elsewhere;
  std::thread([&] {
    for (int i = 0; i < 100; ++i) made_elsewhere.push_back(full({1}, static_cast<float>(i)));
  }).join();
  std::vector<Tensor> made_here;
  for (int i = 0; i < 100; ++i) made_here.push_back(full({1}, static_cast<float>(i)));
  std::thread([dropped = std::move(made_here)]() mutable { dropped.clear(); }).join();
  ASSERT_EQ(made_elsewhere.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(made_elsewhere[i].item<float>(), static_cast<float>(i));
}

}  // namespace
}  // namespace strata
