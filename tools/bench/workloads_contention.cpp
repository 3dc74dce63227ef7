// The contention workload of strata-bench: the D2L exercise and a training epoch, each run on an idle machine and
// then with one busy process per core, and the slowdown (busy / idle). A fair share of the cores would be 2x
// (each core shared with one other process); a pool that waits for descheduled threads is far slower.
#include <fmt/format.h>

#include <cstdint>

#include "busy_cores.h"
#include "strata/runtime/parallel.h"
#include "suite.h"
#include "trainer.h"

namespace strata::bench {
namespace {

WorkloadResult contention(const RunOptions& o) {
  WorkloadResult r;
  const int products = 1000;
  const int64_t images = o.quick ? 1600 : 6400;
  const int busy = busy_cores::cores();
  const auto d2l_seconds = [&] { return d2l_run(kCPU, true, products).seconds; };
  const auto epoch_seconds = [&] { return timed_epoch(o.data_dir, kCPU, images).seconds; };
  const double d2l_idle = d2l_seconds(), epoch_idle = epoch_seconds();
  double d2l_busy = 0, epoch_busy = 0;
  {
    const busy_cores::BusyProcesses load(busy);
    d2l_busy = d2l_seconds();
    epoch_busy = epoch_seconds();
  }
  const std::string load = fmt::format("with {} busy processes (one per core)", busy);
  r.metrics.push_back({"contention_d2l_idle_ms", d2l_idle * 1e3, "ms", Better::Lower,
                       "1000 products of 100x100, norm read after each, idle"});
  r.metrics.push_back({"contention_d2l_busy_ms", d2l_busy * 1e3, "ms", Better::Lower, "the same " + load});
  r.metrics.push_back({"contention_d2l_slowdown", d2l_busy / d2l_idle, "x", Better::Lower,
                       "busy / idle; a fair share is 2, the target <= 3"});
  r.metrics.push_back({"contention_epoch_idle_s", epoch_idle, "s", Better::Lower,
                       fmt::format("an epoch of {} training images, batch 64, idle", images)});
  r.metrics.push_back({"contention_epoch_busy_s", epoch_busy, "s", Better::Lower, "the same " + load});
  r.metrics.push_back({"contention_epoch_slowdown", epoch_busy / epoch_idle, "x", Better::Lower,
                       "busy / idle; a fair share is 2, the target <= 3"});
  r.notes.push_back(fmt::format("{} threads; the busy processes spin in a loop, start 0.2 s before the busy runs and "
                                "are killed after them",
                                num_threads()));
  r.notes.push_back("each figure is one run after a warm-up: the machine's own noise is in it; repeat for medians");
  return r;
}

}  // namespace

std::vector<Workload> contention_workloads() {
  return {{"contention", "10. the D2L exercise and an epoch, idle and with one busy process per core", contention}};
}

}  // namespace strata::bench
