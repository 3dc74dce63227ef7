#include "strata/runtime/parallel.h"

#include <fcntl.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "strata/core/error.h"
#include "strata/runtime/environment.h"

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

// Note [Fewer threads while other processes hold the cores]: 0 until first lowered, meaning num_threads().
std::atomic<int>& thread_budget() {
  static std::atomic<int> budget{0};
  return budget;
}
std::atomic<bool> g_budget_pinned{false};  // detail::pin_thread_budget
std::atomic<int> g_regions_on_team{-1};    // detail::force_regions_on_openmp_team: -1 as the load says, 0 or 1

}  // namespace

int num_threads() { return thread_count(); }

void set_num_threads(int n) {
  STRATA_CHECK(n >= 1, InvalidArgumentError, "set_num_threads: the number of threads must be >= 1, got {}", n);
  thread_count() = n;
  thread_budget().store(0, std::memory_order_relaxed);
  omp_set_num_threads(n);
}

// Note [Fewer threads while other processes hold the cores]
// A region of T threads on cores that other busy processes also run is as slow as its most-delayed thread, and every
// region pays that again; one thread waits for nobody. On a machine with one busy process per core, an epoch on both
// threads was slower than on one in most runs (docs/benchmarks.md, "Under contention"). So long work takes the
// threads the machine leaves free: the budget. The signal is the calling thread's own wait for a core:
// /proc/thread-self/schedstat gives the time it ran and the time it waited while runnable. Sampled at most every
// kContentionSampleNs of wall time (a file read of a few microseconds), over at least kMinRunnableNs of runnable
// time, the fraction d of that time spent waiting says how crowded the cores are (next_thread_budget):
// - d >= kCrowded in kCrowdedSamples samples in a row: T of our threads and O others share C cores, each running
//   C / (T + O) of the time, so O = C / (1 - d) - T. The budget falls to the cores the others leave, C - O: by one
//   at least, to one at least.
// - d < kUncrowded: the budget rises by one, up to num_threads(). A wait near zero cannot tell free cores from a
//   budget that just fits, so the budget probes upward a thread at a time.
// The budget must not change a run's results, or a run would not give the same bits twice, nor a resumed training
// run the uninterrupted one's. Work whose sums are split over its threads keeps num_threads(): oneDNN's weight
// gradients (each thread sums part of the batch) and GEMMs (which may split the inner dimension). oneDNN's forward
// and backward-data convolutions sum each output on one thread in a fixed order, on any number of threads (tested),
// and Strata's regions split sums by num_threads() only (sum_over_batch in backends/cpu/conv.cpp, reductions'
// segments), never by a region's share: those take the budget.
// Waits caused by our own threads count too: a program that runs more host threads than cores gets fewer threads
// per region, which is what it needs. The system's load average would be simpler, but in a container it counts the
// whole host. oneDNN takes the budget through OpenMP's count, which threads_for_work sets on the calling thread.
// oneDNN fixes a primitive's threads when it is made, so the primitive caches are keyed by that count too.
// STRATA_THREAD_BUDGET=off turns this off (thread_budget_follows_load): every region and oneDNN call then takes
// num_threads(), as when the machine is idle, for a user who measures scaling or has the cores to themselves.
namespace {

constexpr int64_t kContentionSampleNs = 10'000'000;
constexpr int64_t kMinRunnableNs = 4'000'000;
constexpr double kCrowded = 0.2;
constexpr double kUncrowded = 0.1;
constexpr int kCrowdedSamples = 2;
// Note [Regions on OpenMP's team while the cores are free]: uncrowded samples in a row at the whole pool before a
// region may run on the team.
constexpr int kIdleSamples = 3;

struct SchedSample {
  int64_t at = 0, ran = 0, waited = 0;
  bool valid = false;
  int crowded = 0;  // crowded samples in a row
  int idle = 0;     // uncrowded samples in a row, taken at the whole pool
};
thread_local SchedSample t_sample;

// The calling thread's time on a core and time waiting for one, in ns, since it started.
bool read_schedstat(int64_t& ran, int64_t& waited) {
  const int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[128];
  const ssize_t got = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (got <= 0) return false;
  text[got] = '\0';
  long long r = 0, w = 0;
  if (std::sscanf(text, "%lld %lld", &r, &w) != 2) return false;
  ran = r;
  waited = w;
  return true;
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void sample_contention() {
  const int all = num_threads();
  if (all <= 1 || g_budget_pinned.load(std::memory_order_relaxed) || !thread_budget_follows_load()) return;
  const int64_t now = steady_ns();
  if (now - t_sample.at < kContentionSampleNs) return;
  int64_t ran = 0, waited = 0;
  if (!read_schedstat(ran, waited)) {
    t_sample = {};  // no schedstat (a kernel without it): try again a sample later, never fail the op
    t_sample.at = now;
    return;
  }
  if (!t_sample.valid) {
    t_sample = {now, ran, waited, true, 0};
    return;
  }
  const int64_t d_ran = ran - t_sample.ran, d_waited = waited - t_sample.waited;
  if (d_ran + d_waited < kMinRunnableNs) {
    t_sample.at = now;  // too little runnable time yet: look again a sample later, against the same start
    return;
  }
  const double d = static_cast<double>(d_waited) / static_cast<double>(d_ran + d_waited);
  const int crowded = d >= kCrowded ? t_sample.crowded + 1 : 0;
  const int idle = d < kUncrowded && budget_of_threads() == all ? t_sample.idle + 1 : 0;
  t_sample = {now, ran, waited, true, crowded, idle};
  // One crowded sample alone is often our own burst (a data loader's batch beside a region): the budget falls on
  // the second in a row.
  if (crowded > 0 && crowded < kCrowdedSamples) return;
  const int budget = budget_of_threads();
  const int next = detail::next_thread_budget(all, budget, d);
  if (next != budget) thread_budget().store(next, std::memory_order_relaxed);
}

}  // namespace

namespace detail {

int next_thread_budget(int all, int budget, double waited) {
  if (waited >= kCrowded) {
    const double others = all / (1.0 - std::min(waited, 0.99)) - budget;
    return std::clamp(static_cast<int>(std::lround(all - others)), 1, std::max(1, budget - 1));
  }
  if (waited < kUncrowded) return std::min(all, budget + 1);
  return budget;
}

void force_regions_on_openmp_team(std::optional<bool> on) {
  g_regions_on_team.store(on ? (*on ? 1 : 0) : -1, std::memory_order_relaxed);
}

void pin_thread_budget(int threads) {
  g_budget_pinned.store(threads > 0, std::memory_order_relaxed);
  thread_budget().store(std::max(threads, 0), std::memory_order_relaxed);
}

}  // namespace detail

bool thread_budget_follows_load() {
  // Read once; a bad value throws here at every call, so every op that would sample says so.
  static const bool follows = [] {
    const auto value = environment_value("STRATA_THREAD_BUDGET");
    return !value || environment_switch("STRATA_THREAD_BUDGET", *value);
  }();
  return follows;
}

int budget_of_threads() {
  const int all = num_threads(), budget = thread_budget().load(std::memory_order_relaxed);
  return budget == 0 ? all : std::min(budget, all);
}

namespace {
// Note [Thread pools after fork]: whether this thread has started an OpenMP team of its own, and whether it forked
// since (then its teams are one thread).
thread_local bool t_started_openmp_team = false;
thread_local bool t_openmp_team_lost_in_fork = false;
}  // namespace

int threads_for_work(bool results_depend_on_threads) {
  if (in_parallel_region() || t_openmp_team_lost_in_fork) return 1;
  sample_contention();
  const int threads = results_depend_on_threads ? num_threads() : budget_of_threads();
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
  if (threads > 1) t_started_openmp_team = true;
  return threads;
}

// Note [Sharing the cores between devices]
// Several host threads may run CPU work at once: one per virtual CPU device (Note [Virtual CPU devices]), a data
// loader beside the training loop, a program's own threads. Each top-level region would take num_threads()
// threads, so two host threads would run twice as many threads as there are cores, each of them descheduled
// half of the time. So the cores are shared fairly rather than split by device: a region takes num_threads()
// divided by the number of host threads in a region at that moment (itself included), at least one. A thread alone
// gets every core, as before; two get half each. Splitting the cores by device instead would leave half of them
// idle whenever one thread drives one of two devices. The count is taken when a region starts, so a region begun
// alone keeps its whole team if a second one starts meanwhile; ops are short, and the next region of each thread
// takes its share.
namespace {

std::atomic<int>& threads_in_regions() {
  static std::atomic<int> count{0};
  return count;
}

// The pool's share of a region started while `others` host threads are in regions.
int share_with(int others) { return std::max(1, budget_of_threads() / (others + 1)); }

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

// Note [How long OpenMP spins]
// oneDNN's GEMMs and convolutions are OpenMP regions. After each region, and at each barrier, libgomp's threads spin
// before they sleep: 300,000 iterations by default, milliseconds. On an idle machine the next region then starts at
// once; on a machine whose cores other processes keep busy, the spinning thread is the one the scheduler takes off
// its core, and the next region waits in its barrier for that thread's next time slice (an epoch ran 5.5x slower
// with one busy process per core; docs/benchmarks.md, "Under contention"). Sleeping at once
// (OMP_WAIT_POLICY=passive) makes every region pay a wake-up instead (the D2L exercise, 1000 small products, 4x
// slower idle); GOMP_SPINCOUNT=10000 kept the idle figures and met the 3x target busy. libgomp reads both only when
// it loads, before any code of libstrata runs (it is a dependency), and a library cannot change them afterwards:
// libgomp exports no setter (its spin counts are hidden variables set from the environment by its constructor), a
// region of more threads than CPUs, kept open for good, does shorten every spin (libgomp throttles then), but it
// also cost the idle D2L exercise 5x, and a function in a program's .preinit_array runs before libc has set up the
// environment it would write to. So the environment is the only way, and it belongs to the user: neither
// `import strata` nor Strata's tools write it or start again to change it (a write changes the environment of every
// process the program then starts, and starting again runs each tool twice). The README's table of
// variables gives the measured effect and says to set GOMP_SPINCOUNT=10000 on a machine shared with other work;
// a C++ program that wants it without the user's help calls restart_with_short_openmp_spin first in main.

// Note [Chunks that the caller claims too]
// parallel_for runs on a pool of our own, not in an OpenMP region (but for Note [Regions on OpenMP's team while the
// cores are free], which claims chunks the same way). When the process does not get every core (other
// busy processes, more host threads than cores), any thread of a region may be descheduled for a whole time slice
// of a few milliseconds, and an OpenMP region's closing barrier waits for every team member, even one that never
// ran a line of the region (and, by default, one that spun through its slice: Note [How long OpenMP spins]).
// Hence:
// - [0, n) is cut into a few chunks per thread (each at least `grain` elements), and the caller and the helpers
//   claim them one at a time from an atomic counter. A helper that is late claims nothing, and its share is done
//   by whoever is running.
// - The caller returns as soon as every chunk is finished. It waits only for chunks that another thread claimed
//   and is running, never for a helper that has not woken yet; a helper that wakes after the region ended finds no
//   chunk and sleeps again. So a region completes even when no helper ever runs.
// - Helpers sleep on a condition variable between regions, without spinning: a sleeping thread costs nothing, the
//   scheduler runs a thread that wakes sooner than one that has spun through its slice, and a sleeping helper
//   never holds a core that oneDNN's OpenMP team, spinning between its own calls, is waiting for.
// - Work of a single chunk (n <= grain) stays on the calling thread, as does a nested call.
// The cost is one wake-up per helper and region, which ops below kCpuGrain never pay.
// oneDNN and OpenBLAS still run on OpenMP's threads (Note [One CPU thread pool]); inside a chunk they are told to
// use one thread, as they were inside an OpenMP region, so that a chunk never starts a team of its own.
namespace {

// How many chunks per thread of a region: enough that a late or descheduled helper leaves little behind for the
// others, few enough that claiming one (an atomic add) is nothing beside the work in it.
constexpr int64_t kChunksPerThread = 4;

thread_local bool t_in_region = false;
thread_local int t_region_threads = 1;

// One region of parallel_for. Helpers hold it by shared_ptr, so that one that wakes after the caller returned
// still reads live counters (and then claims nothing: `fn` is only called for a chunk below `chunks`).
struct Region {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunk = 0;
  int chunks = 0, threads = 0;
  int helpers_wanted = 0;  // guarded by the pool's mutex
  std::atomic<int> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
};

// Runs chunks of `r` until none is left, on this thread. After a failure the remaining chunks are skipped (but
// counted as done), and the first exception is kept for the caller.
void run_chunks(Region& r) {
  const bool was_in_region = t_in_region;
  const int was_threads = t_region_threads;
  t_in_region = true;
  t_region_threads = r.threads;
  int finished = 0;
  for (int c = r.next.fetch_add(1, std::memory_order_relaxed); c < r.chunks;
       c = r.next.fetch_add(1, std::memory_order_relaxed)) {
    ++finished;
    if (r.failed.load(std::memory_order_relaxed)) continue;
    const int64_t begin = c * r.chunk, end = std::min(r.n, begin + r.chunk);
    try {
      (*r.fn)(begin, end);
    } catch (...) {
      std::lock_guard lock(r.error_mutex);
      if (!r.error) r.error = std::current_exception();
      r.failed.store(true, std::memory_order_relaxed);
    }
  }
  t_in_region = was_in_region;
  t_region_threads = was_threads;
  if (finished > 0 && r.done.fetch_add(finished, std::memory_order_acq_rel) + finished == r.chunks) {
    r.done.notify_all();
  }
}

// The helpers: threads that sleep until a region wants them. They are created as regions first need them, and,
// like the device allocators, live until the process ends (never joined: a static destructor would race the
// other statics, and a forked child has no threads to join).
class HelperPool {
 public:
  // Queues `r` for `helpers` helpers, runs its chunks on the calling thread and returns when all are finished.
  void run(const std::shared_ptr<Region>& r, int helpers) {
    {
      std::lock_guard lock(mutex_);
      while (static_cast<int>(threads_.size()) < helpers) threads_.emplace_back([this] { serve(); });
      r->helpers_wanted = helpers;
      queue_.push_back(r);
    }
    for (int i = 0; i < helpers; ++i) wake_.notify_one();
    run_chunks(*r);
    {
      // Helpers that have not come by now are not waited for.
      std::lock_guard lock(mutex_);
      if (r->helpers_wanted > 0) std::erase(queue_, r);
    }
    for (int d = r->done.load(std::memory_order_acquire); d < r->chunks; d = r->done.load(std::memory_order_acquire)) {
      r->done.wait(d, std::memory_order_acquire);
    }
  }

 private:
  void serve() {
    // oneDNN and OpenBLAS called from a chunk run on this thread alone (Note [Chunks that the caller claims too]).
    omp_set_num_threads(1);
    for (;;) {
      std::shared_ptr<Region> r;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return !queue_.empty(); });
        r = queue_.front();
        if (--r->helpers_wanted == 0) queue_.pop_front();
      }
      run_chunks(*r);
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Region>> queue_;
  std::vector<std::thread> threads_;
};

// A library called from one of the caller's chunks runs on the caller alone, as on a helper.
class OneOpenMpThread {
 public:
  OneOpenMpThread() : previous_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneOpenMpThread() { omp_set_num_threads(previous_); }
  OneOpenMpThread(const OneOpenMpThread&) = delete;
  OneOpenMpThread& operator=(const OneOpenMpThread&) = delete;

 private:
  int previous_;
};

// Replaced by a new one in a forked child (Note [Thread pools after fork]); never freed.
std::atomic<HelperPool*> g_helper_pool{nullptr};

HelperPool& helper_pool() {
  HelperPool* pool = g_helper_pool.load(std::memory_order_acquire);
  if (pool != nullptr) return *pool;
  auto made = std::make_unique<HelperPool>();
  if (g_helper_pool.compare_exchange_strong(pool, made.get(), std::memory_order_acq_rel)) return *made.release();
  return *pool;  // another thread made it first
}

// Note [Thread pools after fork]
// fork() copies only the thread that calls it; the child inherits the pools' bookkeeping but none of their threads,
// and a pool that waits for them waits forever.
// - Our helpers: the child forgets the parent's pool (leaked, as PyTorch leaks its thread pools in a forked child:
//   its mutex may be held by a thread that is gone) and makes a new one when a region first needs helpers. The count
//   of host threads in regions starts again from zero, as only this thread exists.
// - libgomp (oneDNN's threads) is not fork-safe: a team's threads belong to the thread that started it, and in the
//   child that thread's next team of more than one waits at its start for threads that do not exist. libgomp has no
//   way to forget them, so in the child the thread that forked, if it had started a team, runs OpenMP work on one
//   thread (PyTorch's DataLoader workers set one thread for the same reason). Other threads of the child, which have
//   no team, and Strata's own regions still use every core. That work's results then are one thread's: bits may
//   differ from the parent's for GEMMs and weight gradients, never correctness.
void forget_threads_after_fork() {
  g_helper_pool.store(nullptr, std::memory_order_release);
  threads_in_regions().store(0, std::memory_order_relaxed);
  if (t_started_openmp_team) {
    t_openmp_team_lost_in_fork = true;
    omp_set_num_threads(1);
  }
}

[[maybe_unused]] const bool g_fork_handler_registered =
    pthread_atfork(nullptr, nullptr, forget_threads_after_fork) == 0;

}  // namespace

bool in_parallel_region() { return t_in_region || omp_in_parallel() != 0; }

int threads_in_this_region() { return t_in_region ? t_region_threads : 1; }

// Note [Regions on OpenMP's team while the cores are free]
// oneDNN's products run on OpenMP's team, whose threads spin for a while after each product (Note [How long OpenMP
// spins]). A region of ours right after a product wakes a helper onto a core that an OpenMP thread is spinning on;
// the two share that core until the spin ends, and the region takes longer than on one thread (gelu_backward after
// the MLP's product: 1.62 ms on two threads, 0.90 ms on one; docs/benchmarks.md). While the cores are free, such a
// region runs on the team instead, whose threads are spinning for exactly that and start it at once. It does when
// the calling thread has started a team (threads_for_work), the region takes the whole pool, and the calling
// thread's last kIdleSamples samples (Note [Fewer threads while other processes hold the cores]) were uncrowded at
// the whole pool; or always, with STRATA_THREAD_BUDGET=off (the cores are the user's). Otherwise the helpers serve
// it: a team's closing barrier waits for every one of its threads, and one that other processes keep off its core
// costs a whole time slice (why the helpers exist, Note [Chunks that the caller claims too]); with one busy process
// per core, regions on the team whatever the load made an epoch 3.5-15x slower than idle, against 4.7-5.5x. On the
// team the chunks are claimed as on the helpers, so the results are the same bits either way, and a chunk's own
// oneDNN or OpenBLAS call runs on its thread alone.
namespace {
bool regions_on_openmp_team(int threads) {
  if (!t_started_openmp_team || t_openmp_team_lost_in_fork || threads != num_threads()) return false;
  const int forced = g_regions_on_team.load(std::memory_order_relaxed);
  if (forced >= 0) return forced == 1;
  if (g_budget_pinned.load(std::memory_order_relaxed)) return false;
  return !thread_budget_follows_load() || t_sample.idle >= kIdleSamples;
}
}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain || num_threads() <= 1 || in_parallel_region()) {
    fn(0, n);
    return;
  }
  sample_contention();
  const RegionShare share;
  const int64_t most_chunks = (n + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<int64_t>(share.threads(), most_chunks));
  if (threads <= 1) {
    fn(0, n);
    return;
  }
  auto region = std::make_shared<Region>();
  region->fn = &fn;
  region->n = n;
  region->threads = threads;
  region->chunk = std::max(grain, (n + threads * kChunksPerThread - 1) / (threads * kChunksPerThread));
  region->chunks = static_cast<int>((n + region->chunk - 1) / region->chunk);
  if (regions_on_openmp_team(threads)) {
#pragma omp parallel num_threads(threads)
    {
      omp_set_num_threads(1);  // for a library called from a chunk
      run_chunks(*region);
    }
  } else {
    const OneOpenMpThread one;
    helper_pool().run(region, threads - 1);
  }
  if (region->error) std::rethrow_exception(region->error);
}

void restart_with_short_openmp_spin(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", "10000", 0) != 0) return;
  execv("/proc/self/exe", argv);
  // Only a failed exec gets here: this process keeps libgomp's default, and its children need not differ from it.
  unsetenv("GOMP_SPINCOUNT");
}

}  // namespace strata
