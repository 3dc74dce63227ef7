#include "strata/runtime/parallel.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <exception>
#include <mutex>

#include "strata/core/error.h"

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace strata {

namespace {

// OMP_NUM_THREADS when it is set (as PyTorch honours it: launchers such as torchrun and job scripts set it for each
// process), else every core the process may run on.
int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return n;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, omp_get_num_procs());
}

int& thread_count() {
  static int n = [] {
    const int d = default_threads();
    // Note [One CPU thread pool]. First: OpenBLAS's OpenMP build passes its count on to omp_set_num_threads.
    if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
    omp_set_num_threads(d);
    return d;
  }();
  return n;
}

}  // namespace

int num_threads() { return thread_count(); }

void set_num_threads(int n) {
  STRATA_CHECK(n >= 1, InvalidArgumentError, "set_num_threads: the number of threads must be >= 1, got {}", n);
  thread_count() = n;
  omp_set_num_threads(n);
}

bool in_parallel_region() { return omp_in_parallel() != 0; }

// Note [Sharing the cores between devices]
// Several host threads may run CPU work at once: one per virtual CPU device (Note [Virtual CPU devices]), a data
// loader beside the training loop, a program's own threads. Each top-level region would start a team of
// num_threads() threads, so two threads would run twice as many threads as there are cores, and every region
// would wait for whichever of its threads was descheduled. So the cores are shared fairly rather than split by
// device: a region takes num_threads() divided by the number of host threads in a region at that moment (itself
// included), at least one. A thread alone gets every core, as before; two get half each. Splitting the cores by
// device instead would leave half of them idle whenever one thread drives one of two devices. The count is taken
// when a region starts, so a region begun alone keeps its whole team if a second one starts meanwhile; ops are
// short, and the next region of each thread takes its share.
namespace {

std::atomic<int>& threads_in_regions() {
  static std::atomic<int> count{0};
  return count;
}

// The pool's share of a region started while `others` host threads are in regions.
int share_with(int others) { return std::max(1, num_threads() / (others + 1)); }

class RegionShare {
 public:
  RegionShare() : others_(threads_in_regions().fetch_add(1, std::memory_order_relaxed)) {}
  ~RegionShare() { threads_in_regions().fetch_sub(1, std::memory_order_relaxed); }
  RegionShare(const RegionShare&) = delete;
  RegionShare& operator=(const RegionShare&) = delete;

  int threads() const { return share_with(others_); }

 private:
  int others_;
};

}  // namespace

int fair_share_of_threads() { return share_with(threads_in_regions().load()); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = (n + grain - 1) / grain;
  if (chunks <= 1 || num_threads() <= 1 || in_parallel_region()) {
    fn(0, n);
    return;
  }
  const RegionShare share;
  const int threads = static_cast<int>(std::min<int64_t>(share.threads(), chunks));
  if (threads <= 1) {
    fn(0, n);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    const int count = omp_get_num_threads();
    const int64_t chunk = (n + count - 1) / count;
    const int64_t begin = std::min<int64_t>(n, t * chunk);
    const int64_t end = std::min<int64_t>(n, begin + chunk);
    if (begin < end) {
      try {
        fn(begin, end);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace strata
