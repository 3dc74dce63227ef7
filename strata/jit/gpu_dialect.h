#pragma once

// Note [The GPU dialect's prelude]
// A kernel compiled at run time is written in CUDA C++ as CuPy's RawKernel takes it. NVRTC and hiprtc compile that
// language, but it lacks parts of Strata's dialect, which kGpuDialectPrelude supplies in front of the user's source:
//  - atomicMax/atomicMin on float and double (CUDA has none; HIP has its own, kept, which a kernel cannot redefine),
//    atomicAdd and atomicCAS on long long (neither vendor has them; through unsigned long long, which is the same
//    bits in two's complement), atomicMax/atomicMin on long long where HIP lacks them (CUDA has them);
//  - assert(cond) as Strata's device-side assert (Note [The JIT's device-side assert]).
// The float and double max/min are compare-and-swap loops in which NaN wins, as torch.max: a NaN stored stays, a NaN
// given replaces. Each is a template with a defaulted parameter, so that a kernel that brings its own overload with
// the same signature (CUDA sources often define an atomicMax for float) still compiles, and calls its own. NVRTC has no
// standard headers, so the prelude includes none and uses only built-in types. Everything it declares starts with
// strata_jit_ (or StrataJit), out of the user's way. The plugin hashes the text into its identity(), which keys the
// disk cache: editing the prelude recompiles every cached kernel.
//
// Note [The JIT's device-side assert]
// assert(cond) records the first failure of a module (its source line, the condition's text, the file and the
// function) and then stops the kernel with a trap. The record cannot live in device memory: after a trap the context
// is lost (CUDA's error is sticky) and no copy from the device works any more. So it is written into mapped pinned
// host memory, one StrataJitAssertRecord per loaded module, whose device address load() stores into the module's
// global strata_jit_assert_record; the host reads it after the failed synchronisation without any GPU call
// (LoadedModule::take_assert_failure). Threads claim the record with a compare-and-swap on a flag in device memory
// (strata_jit_assert_claimed; atomics on host memory over PCIe are not guaranteed), the winner fills it, fences at
// system scope, sets `state` to 2 (the host trusts only a record whose state is 2), then the flag to 2, and traps.
// The other failing threads wait for the flag to reach 2 before they trap, since any trap ends the whole launch and
// could cut the winner's writes short. The wait cannot hang: the winner waits for nothing, and a winner in the same
// warp (wavefront) as a waiting thread either runs on by itself (CUDA's independent thread scheduling, sm_70 on) or
// finishes its branch before the warp reaches the loop (AMD's lockstep wavefronts). A module whose kernels never
// assert keeps the global but never writes it. As with CUDA's own assert, the trap costs the process its GPU context:
// every later CUDA call on that device fails, so the DeviceAssertError is the last thing that works there.

namespace strata::jit {

/// The layout of the record that the prelude's assert writes (StrataJitAssertRecord in kGpuDialectPrelude): the two
/// must stay identical, and a change to either changes kGpuDialectVersion.
struct GpuAssertRecord {
  unsigned int state;  // 0: free, 2: recorded (only the winning thread writes it, state last)
  unsigned int line;
  char function[64];
  char file[128];
  char condition[256];
};

static_assert(sizeof(GpuAssertRecord) == 456, "GpuAssertRecord must match StrataJitAssertRecord, without padding");

/// Named in identity() with the prelude's hash; raise it when the record's layout changes.
inline constexpr int kGpuDialectVersion = 1;

/// The module global that holds the device address of the module's assert record.
inline constexpr const char* kAssertRecordGlobal = "strata_jit_assert_record";

/// Prepended to every kernel compiled by NVRTC or hiprtc, before `#line 1 "<file>"` and the user's source.
inline constexpr const char* kGpuDialectPrelude = R"strata_prelude(#line 1 "<strata gpu dialect prelude>"
// Strata's GPU dialect (strata/jit/gpu_dialect.h, Note [The GPU dialect's prelude]).
#if defined(__HIPCC_RTC__) || defined(__HIP__)
#define STRATA_JIT_HIP 1
#else
#define STRATA_JIT_HIP 0
#endif

// ---- atomics -------------------------------------------------------------------------------------------------------
// Templates, so that a kernel that defines its own (CUDA code often carries an atomicMax for float) compiles: its
// plain function is a different entity, and overload resolution prefers it to a template.
#define STRATA_JIT_OVERRIDABLE template <int strata_jit_overridable = 0>
#if !STRATA_JIT_HIP
STRATA_JIT_OVERRIDABLE __device__ __forceinline__ float atomicMax(float* address, float val) {
  unsigned int* bits = reinterpret_cast<unsigned int*>(address);
  unsigned int old = *bits, assumed;
  do {
    assumed = old;
    const float current = __uint_as_float(assumed);
    if (current != current || (val <= current)) break;  // a stored NaN stays; a smaller or equal value changes nothing
    old = atomicCAS(bits, assumed, __float_as_uint(val));
  } while (old != assumed);
  return __uint_as_float(old);
}
STRATA_JIT_OVERRIDABLE __device__ __forceinline__ float atomicMin(float* address, float val) {
  unsigned int* bits = reinterpret_cast<unsigned int*>(address);
  unsigned int old = *bits, assumed;
  do {
    assumed = old;
    const float current = __uint_as_float(assumed);
    if (current != current || (val >= current)) break;
    old = atomicCAS(bits, assumed, __float_as_uint(val));
  } while (old != assumed);
  return __uint_as_float(old);
}
STRATA_JIT_OVERRIDABLE __device__ __forceinline__ double atomicMax(double* address, double val) {
  unsigned long long* bits = reinterpret_cast<unsigned long long*>(address);
  unsigned long long old = *bits, assumed;
  do {
    assumed = old;
    const double current = __longlong_as_double(static_cast<long long>(assumed));
    if (current != current || (val <= current)) break;
    old = atomicCAS(bits, assumed, static_cast<unsigned long long>(__double_as_longlong(val)));
  } while (old != assumed);
  return __longlong_as_double(static_cast<long long>(old));
}
STRATA_JIT_OVERRIDABLE __device__ __forceinline__ double atomicMin(double* address, double val) {
  unsigned long long* bits = reinterpret_cast<unsigned long long*>(address);
  unsigned long long old = *bits, assumed;
  do {
    assumed = old;
    const double current = __longlong_as_double(static_cast<long long>(assumed));
    if (current != current || (val >= current)) break;
    old = atomicCAS(bits, assumed, static_cast<unsigned long long>(__double_as_longlong(val)));
  } while (old != assumed);
  return __longlong_as_double(static_cast<long long>(old));
}
#else
STRATA_JIT_OVERRIDABLE __device__ __forceinline__ long long atomicMax(long long* address, long long val) {
  unsigned long long* bits = reinterpret_cast<unsigned long long*>(address);
  unsigned long long old = *bits, assumed;
  do {
    assumed = old;
    if (static_cast<long long>(assumed) >= val) break;
    old = atomicCAS(bits, assumed, static_cast<unsigned long long>(val));
  } while (old != assumed);
  return static_cast<long long>(old);
}
STRATA_JIT_OVERRIDABLE __device__ __forceinline__ long long atomicMin(long long* address, long long val) {
  unsigned long long* bits = reinterpret_cast<unsigned long long*>(address);
  unsigned long long old = *bits, assumed;
  do {
    assumed = old;
    if (static_cast<long long>(assumed) <= val) break;
    old = atomicCAS(bits, assumed, static_cast<unsigned long long>(val));
  } while (old != assumed);
  return static_cast<long long>(old);
}
#endif
STRATA_JIT_OVERRIDABLE __device__ __forceinline__ long long atomicAdd(long long* address, long long val) {
  return static_cast<long long>(
      atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(val)));
}
STRATA_JIT_OVERRIDABLE __device__ __forceinline__ long long atomicCAS(long long* address, long long compare, long long val) {
  return static_cast<long long>(atomicCAS(reinterpret_cast<unsigned long long*>(address),
                                          static_cast<unsigned long long>(compare),
                                          static_cast<unsigned long long>(val)));
}

// ---- assert --------------------------------------------------------------------------------------------------------
struct StrataJitAssertRecord {
  unsigned int state;
  unsigned int line;
  char function[64];
  char file[128];
  char condition[256];
};
__device__ StrataJitAssertRecord* strata_jit_assert_record;
__device__ unsigned int strata_jit_assert_claimed;

__device__ __forceinline__ void strata_jit_copy_text(char* to, const char* from, int capacity) {
  int i = 0;
  for (; i + 1 < capacity && from[i] != '\0'; ++i) to[i] = from[i];
  to[i] = '\0';
}

__device__ __noinline__ void strata_jit_assert_fail(const char* condition, const char* file, unsigned int line,
                                                    const char* function) {
  StrataJitAssertRecord* record = strata_jit_assert_record;
  if (record != nullptr) {
    if (atomicCAS(&strata_jit_assert_claimed, 0u, 1u) == 0u) {
      record->line = line;
      strata_jit_copy_text(record->function, function, 64);
      strata_jit_copy_text(record->file, file, 128);
      strata_jit_copy_text(record->condition, condition, 256);
      __threadfence_system();
      *static_cast<volatile unsigned int*>(&record->state) = 2u;
      __threadfence_system();
      atomicExch(&strata_jit_assert_claimed, 2u);
    }
    // The first trap ends the whole launch: the others wait until the record is complete.
    while (*static_cast<volatile unsigned int*>(&strata_jit_assert_claimed) != 2u) {
    }
  }
#if STRATA_JIT_HIP
  __builtin_trap();
#else
  __trap();
#endif
}

#undef assert
#define assert(cond) ((cond) ? static_cast<void>(0) : strata_jit_assert_fail(#cond, __FILE__, __LINE__, __func__))
)strata_prelude";

}  // namespace strata::jit
