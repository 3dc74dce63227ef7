// One busy process per core, for the contention workload of strata-bench and of bench/compare-libtorch's
// torch_bench.cpp (which includes this file): both measure their slowdown against the same load. Header-only and
// free of Strata, so that the LibTorch side compiles it too.
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace busy_cores {

/// The cores this process may run on (what `nproc` prints).
inline int cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

/// While it lives, `count` child processes spin in a loop; they are killed when it ends, error or not, and die with
/// this process if it is killed first (PR_SET_PDEATHSIG), so none outlives a benchmark.
class BusyProcesses {
 public:
  explicit BusyProcesses(int count) {
    const pid_t parent = getpid();
    for (int i = 0; i < count; ++i) {
      const pid_t pid = fork();
      if (pid < 0) {
        stop();
        throw std::runtime_error("contention: fork of a busy process failed");
      }
      if (pid == 0) {
        // The child of a threaded process may only make async-signal-safe calls: it spins and nothing else.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0);
        volatile unsigned long spins = 0;
        for (;;) spins = spins + 1;
      }
      children_.push_back(pid);
    }
    // Let each reach its loop (and the scheduler see it as a CPU hog) before anything is timed.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ~BusyProcesses() { stop(); }
  BusyProcesses(const BusyProcesses&) = delete;
  BusyProcesses& operator=(const BusyProcesses&) = delete;

 private:
  void stop() {
    for (pid_t pid : children_) kill(pid, SIGKILL);
    for (pid_t pid : children_) waitpid(pid, nullptr, 0);
    children_.clear();
  }
  std::vector<pid_t> children_;
};

}  // namespace busy_cores
