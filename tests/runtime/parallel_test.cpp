// The CPU thread pool (runtime/parallel.h): Note [One CPU thread pool].
#include "strata/runtime/parallel.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_fixtures.h"

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

using testing::PoolSize;

// Note [Sharing the cores between devices]: a region started while another host thread is in one takes half the
// pool; alone, a thread takes the whole of it. Team sizes are asked of the region, not timed.
TEST(SharingTheCores, TwoHostThreadsInRegionsTakeHalfThePoolEach) {
  const PoolSize pool(4);
  EXPECT_EQ(fair_share_of_threads(), 4);
  std::atomic<bool> inside{false}, observed{false};
  std::atomic<int> first_team{0}, second_team{0};
  std::thread first([&] {
    parallel_for(4, 1, [&](int64_t begin, int64_t) {
      if (begin == 0) {
        first_team = threads_in_this_region();
        inside = true;
        while (!observed) std::this_thread::yield();
      }
    });
  });
  while (!inside) std::this_thread::yield();
  const int share = fair_share_of_threads();
  parallel_for(4, 1, [&](int64_t begin, int64_t) {
    if (begin == 0) second_team = threads_in_this_region();
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
    if (begin == 0) team = threads_in_this_region();
  });
  EXPECT_EQ(team, 3);
  bool inline_call = false;
  parallel_for(10, 100,
               [&](int64_t begin, int64_t end) { inline_call = begin == 0 && end == 10 && !in_parallel_region(); });
  EXPECT_TRUE(inline_call);
}

// Note [Fewer threads while other processes hold the cores]: the budget after one sample.
TEST(FewerThreadsUnderContention, TheBudgetFollowsTheCoresOtherThreadsLeave) {
  // Two cores, a busy process on each: our two threads wait half the time, and the budget falls to one thread. One
  // thread waiting a third of the time (three runnable threads on two cores) keeps it there.
  EXPECT_EQ(detail::next_thread_budget(2, 2, 0.5), 1);
  EXPECT_EQ(detail::next_thread_budget(2, 1, 1.0 / 3), 1);
  // The others gone: no wait, and the budget climbs back a thread at a time, up to the pool.
  EXPECT_EQ(detail::next_thread_budget(2, 1, 0.0), 2);
  EXPECT_EQ(detail::next_thread_budget(2, 2, 0.0), 2);
  // Sixteen cores, eight of them busy: 24 runnable threads, each waiting a third of the time, leave eight.
  EXPECT_EQ(detail::next_thread_budget(16, 16, 1.0 / 3), 8);
  EXPECT_EQ(detail::next_thread_budget(16, 16, 0.2), 12);
  EXPECT_EQ(detail::next_thread_budget(16, 8, 0.05), 9);
  // Between the thresholds the budget stays. Crowded, it falls by one at least, and never below one thread.
  EXPECT_EQ(detail::next_thread_budget(16, 9, 0.15), 9);
  EXPECT_EQ(detail::next_thread_budget(2, 2, 0.2), 1);
  EXPECT_EQ(detail::next_thread_budget(4, 4, 1.0), 1);
}

// Pins the budget for a block of a test, and pins it back to what it was (the pool's, under PoolSize) after.
class PinnedBudget {
 public:
  explicit PinnedBudget(int threads) : previous_(budget_of_threads()) { detail::pin_thread_budget(threads); }
  ~PinnedBudget() { detail::pin_thread_budget(previous_); }
  PinnedBudget(const PinnedBudget&) = delete;
  PinnedBudget& operator=(const PinnedBudget&) = delete;

 private:
  int previous_;
};

TEST(FewerThreadsUnderContention, OnlyWorkWhoseResultsDoNotDependOnTheCountTakesTheBudget) {
  const PoolSize pool(2);
  {
    const PinnedBudget pinned(1);
    EXPECT_EQ(budget_of_threads(), 1);
    EXPECT_EQ(threads_for_work(false), 1);
    EXPECT_EQ(omp_get_max_threads(), 1) << "oneDNN reads the budget from OpenMP's count";
    EXPECT_EQ(threads_for_work(true), 2);
    EXPECT_EQ(omp_get_max_threads(), 2);
    bool inline_call = false;
    parallel_for(2, 1,
                 [&](int64_t begin, int64_t end) { inline_call = begin == 0 && end == 2 && !in_parallel_region(); });
    EXPECT_TRUE(inline_call) << "a region of a one-thread budget runs on the calling thread";
  }
  EXPECT_EQ(budget_of_threads(), 2) << "the pool's pin again";
  std::atomic<int> in_region{0};
  parallel_for(2, 1, [&](int64_t, int64_t) { in_region = std::max(in_region.load(), threads_for_work(false)); });
  EXPECT_EQ(in_region, 1) << "work inside a region's chunk runs on that chunk's thread";
}

// Runs alone, as ctest's strata_tests_contention (tests/CMakeLists.txt): it loads the cores itself, with two busy
// threads per thread of the pool, and the budget must fall while this thread works beside them.
TEST(FewerThreadsUnderContention, BusyThreadsOnEveryCoreLowerTheBudget) {
  if (std::getenv("STRATA_TEST_ALONE") == nullptr) GTEST_SKIP() << "runs alone, as ctest's strata_tests_contention";
  if (num_threads() < 2) GTEST_SKIP() << "a pool of one thread has no budget to lower";
  if (access("/proc/thread-self/schedstat", R_OK) != 0) GTEST_SKIP() << "no /proc/thread-self/schedstat here";
  detail::pin_thread_budget(0);
  set_num_threads(num_threads());  // the budget starts from the whole pool, and follows the load
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int i = 0; i < 2 * num_threads(); ++i) {
    busy.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  int lowest = budget_of_threads();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (lowest == num_threads() && std::chrono::steady_clock::now() < deadline) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    while (std::chrono::steady_clock::now() < until) {
    }
    threads_for_work(false);
    lowest = std::min(lowest, budget_of_threads());
  }
  stop = true;
  for (std::thread& t : busy) t.join();
  EXPECT_LT(lowest, num_threads()) << "the budget stayed at the whole pool for 10 s beside " << busy.size()
                                   << " busy threads";
}

// Note [Chunks that the caller claims too]: what a region promises, whoever runs its chunks: the helpers, or OpenMP's
// team (Note [Regions on OpenMP's team while the cores are free]), each asked for by the parameter. The calling
// thread has a team once it has sized OpenMP's count for work of more than one thread (threads_for_work).
class ChunksThatTheCallerClaimsToo : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    pool_.emplace(4);
    (void)threads_for_work(false);
    detail::force_regions_on_openmp_team(GetParam());
  }
  void TearDown() override {
    detail::force_regions_on_openmp_team(std::nullopt);
    pool_.reset();
  }

 private:
  std::optional<PoolSize> pool_;
};

TEST_P(ChunksThatTheCallerClaimsToo, EveryElementRunsExactlyOnceInChunksOfAtLeastTheGrain) {
  std::atomic<bool> on_team{false};
  parallel_for(1000, 1, [&](int64_t, int64_t) {
    if (omp_in_parallel() != 0) on_team = true;
  });
  EXPECT_EQ(on_team, GetParam()) << "the region ran on the runner the test asked for";
  for (const int64_t n : {2, 7, 100, 1001, 100000}) {
    for (const int64_t grain : {1, 3, 64}) {
      std::vector<std::atomic<int>> runs(static_cast<std::size_t>(n));
      std::atomic<bool> short_chunk{false}, outside{false};
      parallel_for(n, grain, [&](int64_t begin, int64_t end) {
        if (begin < 0 || end > n || begin >= end) outside = true;
        if (end - begin < grain && end != n) short_chunk = true;
        for (int64_t i = std::max<int64_t>(begin, 0); i < std::min(end, n); ++i) ++runs[static_cast<std::size_t>(i)];
      });
      EXPECT_FALSE(outside) << "n " << n << ", grain " << grain;
      EXPECT_FALSE(short_chunk) << "only the last chunk may be shorter than the grain; n " << n << ", grain " << grain;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(runs[static_cast<std::size_t>(i)], 1) << "element " << i << " of n " << n << ", grain " << grain;
      }
    }
  }
}

TEST_P(ChunksThatTheCallerClaimsToo, WorkOfOneGrainStaysOnTheCallingThread) {
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  bool on_caller = false, in_region = true;
  parallel_for(4096, 4096, [&](int64_t begin, int64_t end) {
    ++calls;
    on_caller = begin == 0 && end == 4096 && std::this_thread::get_id() == caller;
    in_region = in_parallel_region();
  });
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(on_caller);
  EXPECT_FALSE(in_region);
}

TEST_P(ChunksThatTheCallerClaimsToo, NestedCallsRunInlineOnTheChunksThread) {
  std::atomic<int> nested_calls{0}, whole_and_inline{0};
  parallel_for(8, 1, [&](int64_t, int64_t) {
    const std::thread::id self = std::this_thread::get_id();
    EXPECT_TRUE(in_parallel_region());
    parallel_for(1000, 1, [&](int64_t begin, int64_t end) {
      ++nested_calls;
      if (begin == 0 && end == 1000 && std::this_thread::get_id() == self) ++whole_and_inline;
    });
  });
  EXPECT_EQ(nested_calls, 8);
  EXPECT_EQ(whole_and_inline, 8);
  EXPECT_FALSE(in_parallel_region());
  EXPECT_EQ(threads_in_this_region(), 1);
}

TEST_P(ChunksThatTheCallerClaimsToo, AnExceptionFromAnyChunkReachesTheCaller) {
  for (const int64_t failing : {0, 5, 15}) {
    std::atomic<int> failures{0};
    try {
      parallel_for(16, 1, [&](int64_t begin, int64_t end) {
        if (begin <= failing && failing < end) {
          ++failures;
          throw std::runtime_error("chunk failed");
        }
      });
      ADD_FAILURE() << "no exception from the chunk holding " << failing;
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "chunk failed");
    }
    EXPECT_EQ(failures, 1);
  }
  // The pool is whole afterwards.
  std::atomic<int64_t> sum{0};
  parallel_for(1000, 1, [&](int64_t begin, int64_t end) { sum += end - begin; });
  EXPECT_EQ(sum, 1000);
}

INSTANTIATE_TEST_SUITE_P(Runners, ChunksThatTheCallerClaimsToo, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "OpenMpTeam" : "Helpers"; });

// The point of the design: a region never waits for a helper that is not running. Here every helper is held in a
// chunk of another host thread's region, and a second region still completes, on its caller alone.
TEST(HelpersThatAreBusy, ARegionCompletesWhileEveryHelperIsBlocked) {
  const PoolSize pool(4);
  constexpr int kHelpers = 3;
  std::atomic<int> blocked{0};
  std::atomic<bool> release{false};
  std::thread holder([&] {
    const std::thread::id self = std::this_thread::get_id();
    parallel_for(64, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() == self) {
        // The holder's chunk waits until every helper has claimed a chunk of this region and is held in it.
        while (blocked < kHelpers && !release) std::this_thread::yield();
        return;
      }
      ++blocked;
      while (!release) std::this_thread::yield();
    });
  });
  while (blocked < kHelpers) std::this_thread::yield();
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::atomic<int>> runs(100);
  std::atomic<bool> elsewhere{false};
  std::atomic<int> team{0};
  parallel_for(100, 1, [&](int64_t begin, int64_t end) {
    team = threads_in_this_region();
    if (std::this_thread::get_id() != caller) elsewhere = true;
    for (int64_t i = begin; i < end; ++i) ++runs[static_cast<std::size_t>(i)];
  });
  release = true;
  holder.join();
  EXPECT_EQ(team, 2) << "the second host thread's share of the pool";
  EXPECT_FALSE(elsewhere) << "every helper was blocked, so the caller ran every chunk";
  for (int i = 0; i < 100; ++i) EXPECT_EQ(runs[static_cast<std::size_t>(i)], 1) << "element " << i;
}

// A program that calls restart_with_short_openmp_spin first in main runs again with GOMP_SPINCOUNT=10000: a forked
// child of this test binary calls it with an argv that runs only the test below, which passes only when the variable
// reached it.
TEST(RestartWithShortOpenMpSpin, ExecsTheProgramAgainWithTheVariableSet) {
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    unsetenv("GOMP_SPINCOUNT");
    unsetenv("OMP_WAIT_POLICY");
    setenv("STRATA_TEST_RESTARTED", "1", 1);
    std::string self = "/proc/self/exe", filter = "--gtest_filter=RestartWithShortOpenMpSpin.TheRestartedProgramSeesIt";
    char* args[] = {self.data(), filter.data(), nullptr};
    restart_with_short_openmp_spin(args);
    _exit(99);  // the exec failed
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "99: the exec failed; 1: the restarted program did not see GOMP_SPINCOUNT";
}

TEST(RestartWithShortOpenMpSpin, TheRestartedProgramSeesIt) {
  if (std::getenv("STRATA_TEST_RESTARTED") == nullptr) GTEST_SKIP() << "the restarted child of the test above";
  ASSERT_NE(std::getenv("GOMP_SPINCOUNT"), nullptr);
  EXPECT_STREQ(std::getenv("GOMP_SPINCOUNT"), "10000");
}

// A choice the user made is kept, and the program is not executed again.
TEST(RestartWithShortOpenMpSpin, ReturnsWhenTheUserChose) {
  for (const char* variable : {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY"}) {
    const char* before = std::getenv(variable);
    const std::string kept = before ? before : "";
    setenv(variable, "passive", 1);
    std::string self = "/bin/false";
    char* args[] = {self.data(), nullptr};
    restart_with_short_openmp_spin(args);  // would replace this process if it executed
    EXPECT_STREQ(std::getenv(variable), "passive");
    if (before != nullptr) {
      setenv(variable, kept.c_str(), 1);
    } else {
      unsetenv(variable);
    }
  }
}

}  // namespace
}  // namespace strata
