#pragma once

#include <cstdint>
#include <functional>

namespace strata {

// Note [One CPU thread pool]
// All CPU work runs on one pool: OpenMP's, which oneDNN uses too. OpenBLAS runs one thread per call, inside ours,
// so that a pool of its own never fights ours over the cores (on 2-core machines that fight costs 40% of a
// training epoch): libstrata links Debian's OpenMP build of OpenBLAS where installed, whose threads are OpenMP's
// (and which runs single-threaded inside our parallel regions), and tells any build to use one thread. (The
// pthread build's threads still spin for ~0.1 s after it is loaded, stalling each of our parallel regions by ~8 ms
// meanwhile: strata/CMakeLists.txt.)

/// Threads used for CPU work; defaults to OMP_NUM_THREADS when set, else every core the process may run on.
int num_threads();
void set_num_threads(int n);

/// Runs fn(begin, end) over [0, n) in chunks of at least `grain` elements, on the pool when n is large enough,
/// inline otherwise. The pool's cores are shared with other host threads running regions at the same time. Exceptions thrown by fn are rethrown on the calling thread.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

/// The threads a parallel region started now would take: num_threads() shared with the other host threads running
/// regions at this moment (Note [Sharing the cores between devices] in parallel.cpp).
int fair_share_of_threads();

/// True on a pool thread inside parallel_for (nested calls then run inline).
bool in_parallel_region();

}  // namespace strata
