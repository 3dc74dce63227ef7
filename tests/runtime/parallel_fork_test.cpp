// Note [Thread pools after fork]: a forked child computes on the pools its parent used. Each child is bounded in
// time (alarm), so a hang fails the test instead of the suite.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include "strata/runtime/parallel.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata {
namespace {

// A product large enough for oneDNN on every thread of the pool, and a region of our own pool; true when both are
// right.
bool products_and_regions_work() {
  const Tensor a = full({256, 256}, 1.0f);
  const float corner = matmul(a, a).to_vector<float>()[0];
  std::atomic<int64_t> sum{0};
  parallel_for(1 << 16, 1, [&](int64_t begin, int64_t end) { sum += end - begin; });
  return corner == 256.0f && sum.load() == (1 << 16);
}

// Runs `child` in a forked process with `seconds` to finish; its exit status (0 when `child` returned true), or -1
// for a child that was killed (by the alarm, or a crash).
int in_forked_child(const std::function<bool()>& child, unsigned seconds = 60) {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(seconds);
    _exit(child() ? 0 : 3);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ThreadPoolsAfterFork, AChildComputesAfterItsParentDid) {
  ASSERT_TRUE(products_and_regions_work());
  EXPECT_EQ(in_forked_child(products_and_regions_work), 0);
  EXPECT_TRUE(products_and_regions_work()) << "the parent's pools are untouched";
}

// Note [Regions on OpenMP's team while the cores are free]: a parent whose regions ran on its OpenMP team leaves a
// child without that team; the child's regions go to the helpers.
TEST(ThreadPoolsAfterFork, AChildComputesAfterItsParentsRegionsRanOnTheTeam) {
  detail::force_regions_on_openmp_team(true);
  ASSERT_TRUE(products_and_regions_work());
  EXPECT_EQ(in_forked_child(products_and_regions_work), 0);
  EXPECT_TRUE(products_and_regions_work());
  detail::force_regions_on_openmp_team(std::nullopt);
}

TEST(ThreadPoolsAfterFork, AGrandchildComputesToo) {
  ASSERT_TRUE(products_and_regions_work());
  EXPECT_EQ(
      in_forked_child([] { return products_and_regions_work() && in_forked_child(products_and_regions_work) == 0; }),
      0);
}

TEST(ThreadPoolsAfterFork, AForkWhileAnotherThreadRunsRegions) {
#if defined(__SANITIZE_ADDRESS__)
  // GCC 12's AddressSanitizer does not hold its own allocator's lock across fork: a child forked while another thread
  // allocates waits for that lock for ever, in the sanitizer, before any of Strata's code runs.
  GTEST_SKIP() << "AddressSanitizer's allocator is not fork-safe while other threads allocate";
#endif
  // First on this thread: a fork while the other thread initialises the library's statics (the backend registry)
  // would leave the child waiting on a static's guard, as in any C++ library.
  ASSERT_TRUE(products_and_regions_work());
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) products_and_regions_work();
  });
  for (int i = 0; i < 5; ++i) EXPECT_EQ(in_forked_child(products_and_regions_work), 0) << "fork " << i;
  stop = true;
  busy.join();
}

TEST(ThreadPoolsAfterFork, AChildsOtherThreadsStartTeamsOfTheirOwn) {
  ASSERT_TRUE(products_and_regions_work());
  EXPECT_EQ(in_forked_child([] {
              bool ok = false;
              std::thread t([&] { ok = products_and_regions_work(); });
              t.join();
              return ok && products_and_regions_work();
            }),
            0);
}

}  // namespace
}  // namespace strata
