// The CPU thread pool (runtime/parallel.h): Note [One CPU thread pool].
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <thread>

#include "strata/runtime/parallel.h"

namespace strata {
namespace {

// The OpenBLAS libstrata loaded must bring no threads of its own (the pthread build's spin for ~0.1 s after it is
// loaded and stall our parallel regions meanwhile), and telling it to use one thread must leave our pool whole
// (the OpenMP build passes its count on to omp_set_num_threads).
TEST(OneCpuThreadPool, OpenBlasRunsOnOurPoolAndLeavesItWhole) {
  const int threads = num_threads();
  EXPECT_EQ(omp_get_max_threads(), threads);
#if STRATA_OPENBLAS_OPENMP
  using GetParallel = int();
  auto* get_parallel = reinterpret_cast<GetParallel*>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  ASSERT_NE(get_parallel, nullptr) << "no OpenBLAS in the process";
  EXPECT_EQ(get_parallel(), 2) << "OpenBLAS is not the OpenMP build (0: serial, 1: pthreads)";
#else
  GTEST_SKIP() << "built without Debian's OpenMP build of OpenBLAS (libopenblas0-openmp)";
#endif
}

// Restores the pool's size when a test ends.
class PoolSize {
 public:
  explicit PoolSize(int n) : previous_(num_threads()) { set_num_threads(n); }
  ~PoolSize() { set_num_threads(previous_); }

 private:
  int previous_;
};

// Note [Sharing the cores between devices]: a region started while another host thread is in one takes half the
// pool; alone, a thread takes the whole of it. Team sizes are asked of OpenMP, not timed.
TEST(SharingTheCores, TwoHostThreadsInRegionsTakeHalfThePoolEach) {
  const PoolSize pool(4);
  EXPECT_EQ(fair_share_of_threads(), 4);
  std::atomic<bool> inside{false}, observed{false};
  std::atomic<int> first_team{0}, second_team{0};
  std::thread first([&] {
    parallel_for(4, 1, [&](int64_t begin, int64_t) {
      if (begin == 0) {
        first_team = omp_get_num_threads();
        inside = true;
        while (!observed) std::this_thread::yield();
      }
    });
  });
  while (!inside) std::this_thread::yield();
  const int share = fair_share_of_threads();
  parallel_for(4, 1, [&](int64_t begin, int64_t) {
    if (begin == 0) second_team = omp_get_num_threads();
  });
  observed = true;
  first.join();
  EXPECT_EQ(first_team, 4);
  EXPECT_EQ(share, 2);
  EXPECT_EQ(second_team, 2);
  EXPECT_EQ(fair_share_of_threads(), 4) << "the count of threads in regions went back to zero";
}

TEST(SharingTheCores, ARegionAloneTakesThePoolAndSmallWorkRunsInline) {
  const PoolSize pool(3);
  int team = 0;
  parallel_for(3, 1, [&](int64_t begin, int64_t) {
    if (begin == 0) team = omp_get_num_threads();
  });
  EXPECT_EQ(team, 3);
  bool inline_call = false;
  parallel_for(10, 100, [&](int64_t begin, int64_t end) { inline_call = begin == 0 && end == 10 && !in_parallel_region(); });
  EXPECT_TRUE(inline_call);
}

}  // namespace
}  // namespace strata
