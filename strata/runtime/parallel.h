#pragma once

#include <cstdint>
#include <functional>
#include <optional>

namespace strata {

// Note [One CPU thread pool]
// All CPU work is sized by one count, num_threads(), and no library brings a pool that fights ours over the cores
// (on 2-core machines that fight costs 40% of a training epoch). parallel_for runs on helper threads of our own
// (Note [Chunks that the caller claims too] in parallel.cpp), or on OpenMP's team while the cores are free (Note
// [Regions on OpenMP's team while the cores are free]); oneDNN runs on OpenMP's threads, set to the same
// count, between our regions, and on one thread inside them; how long OpenMP's threads spin between its regions
// is libgomp's to decide (Note [How long OpenMP spins] in parallel.cpp). OpenBLAS runs one thread per call:
// libstrata links Debian's OpenMP build of OpenBLAS where installed, whose threads would be OpenMP's, and tells any
// build to use one thread. (The pthread build's threads still spin for ~0.1 s after it is loaded, stalling each of
// our parallel regions by ~8 ms meanwhile: strata/CMakeLists.txt.)

/// Threads used for CPU work; defaults to OMP_NUM_THREADS when set, else every core the process may run on.
int num_threads();
void set_num_threads(int n);

/// The threads that work started now may take: num_threads(), or fewer while other busy threads keep the cores
/// (Note [Fewer threads while other processes hold the cores] in parallel.cpp); always num_threads() with
/// STRATA_THREAD_BUDGET=off.
int budget_of_threads();

/// For work on OpenMP's threads (oneDNN), before it starts: samples how crowded the cores are (at most every few
/// milliseconds), sets the calling thread's OpenMP count to the threads the work takes, and returns that count:
/// budget_of_threads() for work whose results are the same bits on any number of threads, num_threads() for work
/// whose results depend on it (a sum split over the threads), so that a run's results never depend on the load;
/// inside a region, 1.
int threads_for_work(bool results_depend_on_threads);

/// Runs fn(begin, end) over [0, n) in chunks of at least `grain` elements: on the calling thread alone when n <= grain
/// (or inside a region), else on the calling thread and the pool, each chunk exactly once. The pool's cores are
/// shared with other host threads running regions at the same time. The first exception thrown by fn is rethrown
/// on the calling thread, and chunks not yet started then are skipped.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

/// The threads a parallel region started now would take: num_threads() shared with the other host threads running
/// regions at this moment (Note [Sharing the cores between devices] in parallel.cpp).
int fair_share_of_threads();

/// True while a thread runs a chunk of a parallel_for region, the caller's included (nested calls then run inline).
bool in_parallel_region();

/// The threads of the region whose chunk the calling thread runs (its share of the pool), 1 outside a region.
int threads_in_this_region();

namespace detail {
/// The budget after a sample in which the calling thread waited for a core `waited` of its runnable time (0 to 1),
/// with `all` = num_threads() and the budget `budget` before (Note [Fewer threads while other processes hold the
/// cores] in parallel.cpp).
int next_thread_budget(int all, int budget, double waited);
/// For tests: holds the budget at `threads` (clamped to num_threads()) and stops sampling; 0 lets it follow the load
/// again from num_threads().
void pin_thread_budget(int threads);
/// For tests: where parallel_for runs a region of the whole pool once the calling thread has an OpenMP team: on that
/// team (true), on the helpers (false), or as the load says (nullopt; Note [Regions on OpenMP's team while the cores
/// are free] in parallel.cpp).
void force_regions_on_openmp_team(std::optional<bool> on);
}  // namespace detail

/// Whether the budget follows the machine's load: STRATA_THREAD_BUDGET, a switch read once, on when unset; off
/// keeps every region and oneDNN call at num_threads() whatever the load. A value that is not a switch throws
/// InvalidArgumentError naming the variable and what it accepts (Note [Strata's environment variables]).
bool thread_budget_follows_load();

/// Opt-in, for a program's main() before anything else (no tool of Strata's calls it): when neither GOMP_SPINCOUNT
/// nor OMP_WAIT_POLICY is set, sets GOMP_SPINCOUNT=10000 and executes the program again (/proc/self/exe with the
/// same argv), since libgomp reads it only when it loads (Note [How long OpenMP spins] in parallel.cpp). Returns
/// when either is set already, or when the exec fails, which leaves the program running with libgomp's default.
void restart_with_short_openmp_spin(char** argv);

}  // namespace strata
