// STRATA_THREAD_BUDGET (thread_budget_follows_load in strata/runtime/parallel.h): read once per process, so each
// case runs in a new process, this test binary executed again with the variable set and a filter that picks the
// child half below.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "strata/core/error.h"
#include "strata/runtime/environment.h"
#include "strata/runtime/parallel.h"

namespace strata {
namespace {

// Runs this binary again with STRATA_THREAD_BUDGET=`value` and only the test `child`; its exit status.
int run_child(const char* value, const std::string& child) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("STRATA_THREAD_BUDGET", value, 1);
    setenv("STRATA_TEST_THREAD_BUDGET_CHILD", "1", 1);
    std::string self = "/proc/self/exe", filter = "--gtest_filter=" + child;
    char* args[] = {self.data(), filter.data(), nullptr};
    execv(self.c_str(), args);
    _exit(99);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

bool in_child() { return std::getenv("STRATA_TEST_THREAD_BUDGET_CHILD") != nullptr; }

TEST(ThreadBudgetSwitch, OffKeepsThePoolWholeBesideBusyThreads) {
  EXPECT_EQ(run_child("off", "ThreadBudgetSwitchChild.Off"), 0) << "99: the exec failed; 1: the child's test failed";
}

TEST(ThreadBudgetSwitch, ABadValueIsAnErrorNamingTheVariableAndItsValues) {
  EXPECT_EQ(run_child("sometimes", "ThreadBudgetSwitchChild.BadValue"), 0)
      << "99: the exec failed; 1: the child's test failed";
}

TEST(ThreadBudgetSwitch, UnsetOrOnFollowsTheLoad) {
  if (in_child()) GTEST_SKIP() << "the parent's case";
  EXPECT_EQ(run_child("on", "ThreadBudgetSwitchChild.On"), 0) << "99: the exec failed; 1: the child's test failed";
  const char* value = std::getenv("STRATA_THREAD_BUDGET");
  if (value == nullptr || *value == '\0') EXPECT_TRUE(thread_budget_follows_load());
}

// With the switch off, two busy threads per thread of the pool for a second leave the budget at the whole pool
// (with it on, the same load lowers it: FewerThreadsUnderContention.BusyThreadsOnEveryCoreLowerTheBudget).
TEST(ThreadBudgetSwitchChild, Off) {
  if (!in_child()) GTEST_SKIP() << "run by ThreadBudgetSwitch.OffKeepsThePoolWholeBesideBusyThreads";
  EXPECT_FALSE(thread_budget_follows_load());
  set_num_threads(2);
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int i = 0; i < 4; ++i) {
    busy.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  int lowest = budget_of_threads(), fewer = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    while (std::chrono::steady_clock::now() < until) {
    }
    fewer += threads_for_work(false) != 2;
    lowest = std::min(lowest, budget_of_threads());
  }
  stop = true;
  for (std::thread& t : busy) t.join();
  EXPECT_EQ(lowest, 2);
  EXPECT_EQ(fewer, 0) << "calls to threads_for_work that got fewer than the pool's 2 threads";
}

TEST(ThreadBudgetSwitchChild, On) {
  if (!in_child()) GTEST_SKIP() << "run by ThreadBudgetSwitch.UnsetOrOnFollowsTheLoad";
  EXPECT_TRUE(thread_budget_follows_load());
}

TEST(ThreadBudgetSwitchChild, BadValue) {
  if (!in_child()) GTEST_SKIP() << "run by ThreadBudgetSwitch.ABadValueIsAnErrorNamingTheVariableAndItsValues";
  set_num_threads(2);                              // a pool of one thread never samples the load
  for (int attempt = 0; attempt < 2; ++attempt) {  // the same error every time, not a default after the first
    try {
      (void)thread_budget_follows_load();
      ADD_FAILURE() << "STRATA_THREAD_BUDGET=sometimes was accepted";
    } catch (const InvalidArgumentError& e) {
      const std::string message = e.what();
      for (const char* part : {"STRATA_THREAD_BUDGET", "sometimes", "on", "off"}) {
        EXPECT_NE(message.find(part), std::string::npos) << part << " missing from: " << message;
      }
    }
  }
  EXPECT_THROW(check_environment(), InvalidArgumentError) << "checked with the runtime's other variables";
  EXPECT_THROW(threads_for_work(false), InvalidArgumentError) << "and by the work that would follow the load";
}

}  // namespace
}  // namespace strata
