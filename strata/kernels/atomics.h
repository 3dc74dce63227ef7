#pragma once

// Atomic read-modify-write operations for kernels, on the host and on NVIDIA and AMD GPUs: add, min, max and
// compare-and-swap on f32, f64, i32 and i64. Each returns the value *address held before.
//
// Standard C++ and core/macros.h (preprocessor only) alone: the run-time compiler's CPU dialect includes this header
// into kernels compiled while a program runs, where neither libstrata's symbols nor fmt are at hand.
//
// Note [Atomic min and max of floating point]
// CUDA and HIP have no atomic min or max of float or double (HIP 5.2 has one for float on some targets, CUDA none),
// and the host has none before C++26 (std::atomic_ref::fetch_min), so both are compare-and-swap loops on the bits:
// read the value, stop when the new one would not replace it, otherwise swap it in if nobody changed the value
// meanwhile, and retry with what they wrote. A NaN wins, as in max() and min() of tensors (PyTorch's too): a NaN
// replaces a number and nothing replaces a NaN, so that a NaN anywhere in a reduction shows in its result. -0.0 and
// 0.0 compare equal, so whichever came first stays. The integer min and max of the host are the same loop; the
// GPUs' are native where the vendor has one (not HIP's i64). atomic_cas compares bits, as the hardware does: for
// floats, -0.0 does not match 0.0 and a NaN matches the same NaN.

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "strata/core/macros.h"
// The vendor's atomics must be declared before the templates below name them. nvcc includes its runtime in every .cu
// file; hipcc does not.
#if defined(STRATA_GPU_COMPILER) && defined(STRATA_GPU_HIP)
#include <hip/hip_runtime.h>
#endif

namespace strata::kernels {

namespace atomic_detail {

template <typename T>
inline constexpr bool kSupported = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                   std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;

/// Whether `value` replaces `current` in a min (kMax false) or a max: a NaN replaces anything but a NaN.
template <bool kMax, typename T>
STRATA_HOST_DEVICE inline bool replaces(T current, T value) {
  if constexpr (std::is_floating_point_v<T>) {
    if (value != value) return current == current;
    if (current != current) return false;
  }
  return kMax ? value > current : value < current;
}

#if defined(STRATA_DEVICE_PASS)
/// The unsigned word CUDA's and HIP's atomicCAS take for a T of the same size.
template <typename T>
using Word = std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;

template <typename T>
__device__ inline Word<T> bits_of(T value) {
  Word<T> w;
  STRATA_BIT_COPY(&w, &value, sizeof(T));
  return w;
}

template <typename T>
__device__ inline T from_bits(Word<T> w) {
  T value;
  STRATA_BIT_COPY(&value, &w, sizeof(T));
  return value;
}

template <typename T>
__device__ inline T cas(T* address, T expected, T desired) {
  return from_bits<T>(atomicCAS(reinterpret_cast<Word<T>*>(address), bits_of(expected), bits_of(desired)));
}

/// Min or max by a compare-and-swap loop (Note [Atomic min and max of floating point]).
template <bool kMax, typename T>
__device__ inline T extremum_by_cas(T* address, T value) {
  // A stale first read only costs one more round: the swap compares against memory.
  T old = *reinterpret_cast<volatile T*>(address);
  while (replaces<kMax>(old, value)) {
    const T seen = cas(address, old, value);
    if (bits_of(seen) == bits_of(old)) break;
    old = seen;
  }
  return old;
}

template <bool kMax, typename T>
__device__ inline T extremum(T* address, T value) {
  if constexpr (std::is_same_v<T, std::int32_t>) {
    return kMax ? atomicMax(address, value) : atomicMin(address, value);
#if !defined(STRATA_GPU_HIP)
  } else if constexpr (std::is_same_v<T, std::int64_t>) {  // int64_t is long; CUDA's overload takes long long
    auto* p = reinterpret_cast<long long*>(address);
    return kMax ? atomicMax(p, static_cast<long long>(value)) : atomicMin(p, static_cast<long long>(value));
#endif
  } else {  // floats everywhere, and i64 on HIP (no signed 64-bit atomicMin in HIP 5.2)
    return extremum_by_cas<kMax>(address, value);
  }
}
#else
template <bool kMax, typename T>
inline T extremum(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load(std::memory_order_relaxed);
  // compare_exchange_weak reloads `old` when it fails, and compares bits, so a NaN there does not spin.
  while (replaces<kMax>(old, value) && !ref.compare_exchange_weak(old, value, std::memory_order_relaxed)) {
  }
  return old;
}
#endif

}  // namespace atomic_detail

/// Adds `value` to *address atomically; returns the previous value. Relaxed: it orders no other access.
template <typename T>
STRATA_HOST_DEVICE inline T atomic_add(T* address, T value) {
  static_assert(atomic_detail::kSupported<T>, "atomic_add supports float, double, int32_t and int64_t");
#if defined(STRATA_DEVICE_PASS)
  if constexpr (std::is_same_v<T, std::int64_t>) {  // no signed 64-bit atomicAdd; two's complement agrees
    return static_cast<T>(
        atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value)));
  } else {
    return atomicAdd(address, value);
  }
#else
  return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
#endif
}

/// Stores min(*address, value) atomically; returns the previous value. A NaN wins (Note [Atomic min and max of
/// floating point]).
template <typename T>
STRATA_HOST_DEVICE inline T atomic_min(T* address, T value) {
  static_assert(atomic_detail::kSupported<T>, "atomic_min supports float, double, int32_t and int64_t");
  return atomic_detail::extremum<false>(address, value);
}

/// Stores max(*address, value) atomically; returns the previous value. A NaN wins.
template <typename T>
STRATA_HOST_DEVICE inline T atomic_max(T* address, T value) {
  static_assert(atomic_detail::kSupported<T>, "atomic_max supports float, double, int32_t and int64_t");
  return atomic_detail::extremum<true>(address, value);
}

/// Stores `desired` if *address holds `expected` (compared bit for bit), atomically; returns the previous value,
/// so the swap happened when that equals `expected`.
template <typename T>
STRATA_HOST_DEVICE inline T atomic_cas(T* address, T expected, T desired) {
  static_assert(atomic_detail::kSupported<T>, "atomic_cas supports float, double, int32_t and int64_t");
#if defined(STRATA_DEVICE_PASS)
  return atomic_detail::cas(address, expected, desired);
#else
  std::atomic_ref<T>(*address).compare_exchange_strong(expected, desired, std::memory_order_relaxed);
  return expected;  // the value found, whether or not it was replaced
#endif
}

}  // namespace strata::kernels
