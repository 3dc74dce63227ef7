#include "strata/runtime/parallel.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <exception>
#include <mutex>

#include "strata/core/error.h"

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace strata {

namespace {

int default_threads() {
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

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), (n + grain - 1) / grain));
  if (threads <= 1 || in_parallel_region()) {
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
