#pragma once

// CUDA's kernel dialect on the CPU. strata::jit puts `#include "strata/jit/cpu_dialect.h"` before a kernel's source
// when it compiles the kernel for the CPU with the host C++ compiler, and adds an entry point per kernel that runs a
// range of blocks (see Note [Kernels compiled at run time on the CPU] in jit/jit.cpp). Standard C++ only, and no
// libstrata symbols: the shared object it becomes is loaded into any process that has libstrata, and is cached on
// disk with a hash of this header and the ones it includes.
//
// What the dialect has: threadIdx, blockIdx, blockDim, gridDim (per GPU thread), dim3, __global__, __device__,
// __host__, __forceinline__, __launch_bounds__, __restrict__, __shared__ (one instance per block), extern __shared__
// (the launch's dynamic size; jit.cpp rewrites the declaration), __syncthreads() (a real barrier: kernels that use it
// become coroutines, Note [Threads of a block on the CPU] in kernels/block.h), __threadfence(), CUDA's atomics on
// int, unsigned, long long, unsigned long long, float and double, <cmath> with CUDA's float names and intrinsics,
// min/max, printf, and assert() as Strata's device-side assert; beyond CUDA, for generators of straight-line
// kernels, checked_load / checked_store with STRATA_CHECK_SITES (Note [Checked indices that vectorise]).
// Warp-level functions (__shfl_sync, __ballot_sync) and textures are not: using one is a compile error that names it.

#include <math.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iterator>
#include <limits>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/kernels/block.h"

namespace strata::jit::cpu {

/// The version of the interface between libstrata and a compiled kernel (Launch and the entry points): part of the
/// disk cache's key, raised whenever either changes.
inline constexpr unsigned kAbiVersion = 2;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// One launch, as libstrata describes it to the compiled kernel's entry point.
struct Launch {
  Dim3 grid, block;
  std::size_t dynamic_shared = 0;
  // The first failure of the launch (an assert or an exception): 0 none, 1 being written, 2 written.
  int failed = 0;
  int line = 0;  // the source line of a failed assert; 0 for an exception
  Dim3 failed_block, failed_thread;
  char message[512] = {};
};

/// Where a GPU thread is. A kernel without a barrier gets its own as a hidden first parameter named __strata_idx
/// (Note [The thread index on the CPU]); everything else reads the thread-local one of that name below.
struct ThreadState {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  void* dynamic_shared = nullptr;
  Launch* launch = nullptr;
  // The block's first failed checked index (Note [Checked indices that vectorise]): thread << 6 | site, the least
  // over the block's threads; kNoFailedCheck when none failed.
  mutable std::uint32_t failed_check = std::numeric_limits<std::uint32_t>::max();
};

inline constexpr std::uint32_t kNoFailedCheck = std::numeric_limits<std::uint32_t>::max();

/// Thrown by a failed assert to end the launch; the entry point catches it.
struct KernelAbort {};

inline void record_failure(Launch& launch, int line, const char* message, const ThreadState& where) {
  int expected = 0;
  if (!std::atomic_ref<int>(launch.failed).compare_exchange_strong(expected, 1)) return;
  launch.line = line;
  launch.failed_block = where.block_idx;
  launch.failed_thread = where.thread_idx;
  std::snprintf(launch.message, sizeof launch.message, "%s", message);
  std::atomic_ref<int>(launch.failed).store(2, std::memory_order_release);
}

[[noreturn]] inline void assert_failed(const char* condition, int line, const ThreadState& where) {
  record_failure(*where.launch, line, condition, where);
  throw KernelAbort{};
}

inline bool launch_failed(const Launch& launch) {
  return std::atomic_ref<const int>(launch.failed).load(std::memory_order_acquire) != 0;
}

inline Dim3 unflatten(std::int64_t i, Dim3 extent) {
  return {static_cast<unsigned>(i % extent.x), static_cast<unsigned>(i / extent.x % extent.y),
          static_cast<unsigned>(i / (static_cast<std::int64_t>(extent.x) * extent.y))};
}

// Note [Checked indices that vectorise]
// An assert that fails ends its thread (it throws KernelAbort), and a loop whose body may leave it is not vectorised:
// strata.jit's vector add with every index asserted ran at 0.6x the unchecked one. So a generator that knows its
// kernel always reaches its end (strata.jit's, for a kernel without loops or calls: straight-line code) may check an
// index with checked_load / checked_store instead. An index out of range reads 0 and skips the store, so memory
// outside the array is never touched; the thread goes on to its end, and the failure is kept as the least of
// thread << 6 | site over the block's threads. Three things keep the loop over threads vectorised (each was seen to
// stop it): the address stays the plain affine offset with the check as the load's or store's mask (a select on the
// offset hid it from the alias checks); the least is a 32-bit min-reduction into a local of the innermost loop (a
// 64-bit one halved the vector width; a field carried through the outer loops was not taken as a reduction); 0 <= i
// < n is one unsigned comparison. After the block, the runner reports the first failing thread and its first
// failing site as a failed assert with the site's line and text (CheckSites): the launch raises as with an assert,
// after the rest of the failing block ran with its bad accesses skipped.

/// A site of checked_load / checked_store in a kernel: where it is and what it checks. STRATA_CHECK_SITES lists a kernel's.
struct CheckSite {
  int line;
  const char* text;
};

/// A kernel's check sites; none unless STRATA_CHECK_SITES(kernel, ...) specialises it.
template <auto Kernel>
struct CheckSites {
  static constexpr std::size_t count = 0;
  static constexpr const CheckSite* list = nullptr;
};

/// Whether an index (i0, i1, ...) is inside an array of extents (n0, n1, ...), given as i0, n0, i1, n1, ...; its
/// flat offset in `offset` either way. A failure is kept in the thread's failed_check with this site: the index of
/// the check in the kernel's CheckSites, below 64.
template <unsigned Site, typename... IndexThenExtent>
inline bool check_index(const ThreadState& s, long long& offset, IndexThenExtent... index_then_extent) {
  static_assert(Site < 64 && sizeof...(IndexThenExtent) % 2 == 0);
  const long long v[] = {static_cast<long long>(index_then_extent)...};
  bool ok = true;
  offset = 0;
  for (std::size_t k = 0; k < sizeof...(IndexThenExtent); k += 2) {
    // 0 <= i < n as one unsigned comparison (an extent is never negative): half the vector compares.
    ok = ok & (static_cast<unsigned long long>(v[k]) < static_cast<unsigned long long>(v[k + 1]));
    offset = offset * v[k + 1] + v[k];
  }
  const std::uint32_t thread = s.thread_idx.x + s.block_dim.x * (s.thread_idx.y + s.block_dim.y * s.thread_idx.z);
  s.failed_check = std::min(s.failed_check, ok ? kNoFailedCheck : thread << 6 | Site);
  return ok;
}

/// p[index], or 0 when the index is out of range. The address stays the plain (affine) offset, under the check as a
/// mask: a select on the offset would hide it from the vectoriser's alias checks.
template <unsigned Site, typename T, typename... IndexThenExtent>
inline T checked_load(const ThreadState& s, const T* p, IndexThenExtent... index_then_extent) {
  long long offset;
  return check_index<Site>(s, offset, index_then_extent...) ? p[offset] : T(0);
}

/// p[index] = value, skipped when the index is out of range.
template <unsigned Site, typename T, typename... IndexThenExtent>
inline void checked_store(const ThreadState& s, T* p, T value, IndexThenExtent... index_then_extent) {
  long long offset;
  if (check_index<Site>(s, offset, index_then_extent...)) p[offset] = value;
}

/// Reports a block's first failed check as a failed assert of that site.
inline void report_failed_check(Launch& launch, const CheckSite* sites, std::uint32_t failed, Dim3 block_idx) {
  ThreadState where;
  where.block_idx = block_idx;
  where.thread_idx = unflatten(static_cast<std::int64_t>(failed >> 6), launch.block);
  const CheckSite& site = sites[failed & 63];
  record_failure(launch, site.line, site.text, where);
}

template <typename P>
using Value = std::remove_cv_t<std::remove_reference_t<P>>;

}  // namespace strata::jit::cpu

// Note [The thread index on the CPU]
// threadIdx, blockIdx, blockDim and gridDim read __strata_idx. For a kernel without a barrier, jit.cpp's rewrite adds
// a first parameter `const ThreadState& __strata_idx`, which shadows the thread-local variable below: the entry point
// loops over the block's threads with the index in a local variable, so the compiler keeps it in registers and can
// vectorise that loop (a vector add then runs as fast as Strata's own). Code outside such a kernel (a __device__
// function, a kernel with a barrier, whose threads are coroutines) reads the thread-local one, which the entry point
// keeps current: per resumption for coroutines, and per thread for loops only when the source reads the index
// outside its kernels (SourceInfo::index_outside_kernels), since that store costs the loop its vectorisation.
inline thread_local ::strata::jit::cpu::ThreadState __strata_idx;

namespace strata::jit::cpu {

/// Runs blocks [begin, end) of a launch of a kernel without a barrier, its threads as a loop.
template <auto Kernel, bool SyncGlobal, typename... P, std::size_t... I>
void run_loops(Launch& launch, void* const* args, std::int64_t begin, std::int64_t end,
               void (*)(const ThreadState&, P...), std::index_sequence<I...>) {
  const std::tuple<Value<P>...> values{*static_cast<Value<P>*>(args[I])...};
  ThreadState idx = ::__strata_idx;
  idx.failed_check = kNoFailedCheck;
  const Dim3 block = launch.block;
  for (std::int64_t b = begin; b < end && !launch_failed(launch); ++b) {
    idx.block_idx = unflatten(b, launch.grid);
    if constexpr (SyncGlobal) ::__strata_idx.block_idx = idx.block_idx;
    for (unsigned z = 0; z < block.z; ++z) {
      for (unsigned y = 0; y < block.y; ++y) {
        // A row's failures in a local of the loop, which the vectoriser takes as a min-reduction (Note [Checked
        // indices that vectorise]); a field carried through the outer loops is not.
        std::uint32_t row_failed = kNoFailedCheck;
        for (unsigned x = 0; x < block.x; ++x) {
          ThreadState thread = idx;
          thread.thread_idx = {x, y, z};
          if constexpr (SyncGlobal) ::__strata_idx.thread_idx = thread.thread_idx;
          Kernel(thread, std::get<I>(values)...);
          row_failed = std::min(row_failed, thread.failed_check);
        }
        idx.failed_check = std::min(idx.failed_check, row_failed);
      }
    }
    if constexpr (CheckSites<Kernel>::count != 0) {
      if (idx.failed_check != kNoFailedCheck)
        return report_failed_check(launch, CheckSites<Kernel>::list, idx.failed_check, idx.block_idx);
    }
  }
}

/// Runs blocks [begin, end) of a launch of a kernel with a barrier: its threads are coroutines (kernels/block.h).
template <auto Kernel, bool SyncGlobal, typename... P, std::size_t... I>
void run_coroutines(Launch& launch, void* const* args, std::int64_t begin, std::int64_t end,
                    kernels::BlockThread (*)(P...), std::index_sequence<I...>) {
  const std::int64_t threads = static_cast<std::int64_t>(launch.block.x) * launch.block.y * launch.block.z;
  for (std::int64_t b = begin; b < end && !launch_failed(launch); ++b) {
    ::__strata_idx.block_idx = unflatten(b, launch.grid);
    ::__strata_idx.failed_check = kNoFailedCheck;
    kernels::run_block(
        threads, [&](std::int64_t) { return Kernel(*static_cast<Value<P>*>(args[I])...); },
        [&](std::int64_t t) { ::__strata_idx.thread_idx = unflatten(t, launch.block); });
    if constexpr (CheckSites<Kernel>::count != 0) {
      const std::uint32_t failed = ::__strata_idx.failed_check;
      if (failed != kNoFailedCheck)
        return report_failed_check(launch, CheckSites<Kernel>::list, failed, ::__strata_idx.block_idx);
    }
  }
}

template <auto Kernel, bool SyncGlobal, typename... P>
void run(Launch& launch, void* const* args, std::int64_t begin, std::int64_t end, void (*f)(const ThreadState&, P...)) {
  run_loops<Kernel, SyncGlobal>(launch, args, begin, end, f, std::index_sequence_for<P...>{});
}
template <auto Kernel, bool SyncGlobal, typename... P>
void run(Launch& launch, void* const* args, std::int64_t begin, std::int64_t end, kernels::BlockThread (*f)(P...)) {
  run_coroutines<Kernel, SyncGlobal>(launch, args, begin, end, f, std::index_sequence_for<P...>{});
}

/// Runs blocks [begin, end) of a launch on this thread: the body of every entry point. SyncGlobal: keep the
/// thread-local index current for a loop's every thread (Note [The thread index on the CPU]).
template <auto Kernel, bool SyncGlobal>
void run_blocks(Launch& launch, void* const* args, std::int64_t begin, std::int64_t end) noexcept {
  thread_local std::vector<std::max_align_t> dynamic;
  const std::size_t words = (launch.dynamic_shared + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
  try {
    if (dynamic.size() < words) dynamic.resize(words);
    ::__strata_idx.dynamic_shared = dynamic.data();
    ::__strata_idx.launch = &launch;
    ::__strata_idx.block_dim = launch.block;
    ::__strata_idx.grid_dim = launch.grid;
    run<Kernel, SyncGlobal>(launch, args, begin, end, Kernel);
  } catch (const KernelAbort&) {
  } catch (const std::exception& e) {
    record_failure(launch, 0, e.what(), ::__strata_idx);
  } catch (...) {
    record_failure(launch, 0, "an exception that is not a std::exception", ::__strata_idx);
  }
}

// ---- atomics, as CUDA names them; each returns the old value ----
template <typename T>
T atomic_update(T* address, T value, T (*op)(T, T)) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load(std::memory_order_relaxed);
  while (!ref.compare_exchange_weak(old, op(old, value), std::memory_order_relaxed)) {
  }
  return old;
}

}  // namespace strata::jit::cpu

using dim3 = ::strata::jit::cpu::Dim3;
using uint3 = ::strata::jit::cpu::Dim3;

#define threadIdx (__strata_idx.thread_idx)
#define blockIdx (__strata_idx.block_idx)
#define blockDim (__strata_idx.block_dim)
#define gridDim (__strata_idx.grid_dim)

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static thread_local
#define __constant__ static
#define __syncthreads() \
  co_await ::strata::kernels::BlockBarrier {}
#define __threadfence() std::atomic_thread_fence(std::memory_order_seq_cst)
#define __threadfence_block() std::atomic_thread_fence(std::memory_order_seq_cst)
#define __threadfence_system() std::atomic_thread_fence(std::memory_order_seq_cst)

// A kernel's check sites (Note [Checked indices that vectorise]), after the kernel: STRATA_CHECK_SITES(name, {line,
// "text"}, ...), in the order of their Site.
#define STRATA_CHECK_SITES(kernel, ...)                                    \
  template <>                                                              \
  struct strata::jit::cpu::CheckSites<&kernel> {                           \
    static constexpr ::strata::jit::cpu::CheckSite list[] = {__VA_ARGS__}; \
    static constexpr std::size_t count = std::size(list);                  \
  };

#undef assert
#define assert(condition) \
  ((condition) ? static_cast<void>(0) : ::strata::jit::cpu::assert_failed(#condition, __LINE__, __strata_idx))

template <typename T>
inline T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
}
template <typename T>
inline T atomicSub(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_sub(value, std::memory_order_relaxed);
}
template <typename T>
inline T atomicExch(T* address, T value) {
  return std::atomic_ref<T>(*address).exchange(value, std::memory_order_relaxed);
}
template <typename T>
inline T atomicMax(T* address, T value) {
  return ::strata::jit::cpu::atomic_update<T>(address, value, [](T a, T b) { return a < b ? b : a; });
}
template <typename T>
inline T atomicMin(T* address, T value) {
  return ::strata::jit::cpu::atomic_update<T>(address, value, [](T a, T b) { return b < a ? b : a; });
}
template <typename T>
inline T atomicCAS(T* address, T compare, T value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value, std::memory_order_relaxed);
  return compare;  // the old value, whether or not it was replaced
}
inline int atomicAnd(int* address, int value) { return std::atomic_ref<int>(*address).fetch_and(value); }
inline int atomicOr(int* address, int value) { return std::atomic_ref<int>(*address).fetch_or(value); }
inline int atomicXor(int* address, int value) { return std::atomic_ref<int>(*address).fetch_xor(value); }

// CUDA's min and max take two numbers of possibly different types.
template <typename A, typename B>
inline std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}
template <typename A, typename B>
inline std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}

// CUDA's intrinsics and float functions that C++ lacks.
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}
