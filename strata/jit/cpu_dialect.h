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
// min/max, printf, and assert() as Strata's device-side assert. Warp-level functions (__shfl_sync, __ballot_sync)
// and textures are not: using one is a compile error that names it.

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
};

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
  const Dim3 block = launch.block;
  for (std::int64_t b = begin; b < end && !launch_failed(launch); ++b) {
    idx.block_idx = unflatten(b, launch.grid);
    if constexpr (SyncGlobal) ::__strata_idx.block_idx = idx.block_idx;
    for (unsigned z = 0; z < block.z; ++z) {
      for (unsigned y = 0; y < block.y; ++y) {
        for (unsigned x = 0; x < block.x; ++x) {
          idx.thread_idx = {x, y, z};
          if constexpr (SyncGlobal) ::__strata_idx.thread_idx = idx.thread_idx;
          Kernel(idx, std::get<I>(values)...);
        }
      }
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
    kernels::run_block(
        threads, [&](std::int64_t) { return Kernel(*static_cast<Value<P>*>(args[I])...); },
        [&](std::int64_t t) { ::__strata_idx.thread_idx = unflatten(t, launch.block); });
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
