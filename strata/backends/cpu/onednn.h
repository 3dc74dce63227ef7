#pragma once

// What the CPU kernels on oneDNN share (conv.cpp, matmul.cpp). Included only where STRATA_HAVE_DNNL is set.

#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <shared_mutex>

namespace strata::cpu {

/// The CPU engine every oneDNN primitive and memory of Strata's is made with.
inline const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// Whether oneDNN runs its AVX-512 kernels on this CPU. Some CPU decisions were measured on both kinds and differ
/// (Note [Choosing the CPU GEMM] and Note [Padding B's rows for AVX2's sgemm] in matmul.cpp).
inline bool onednn_uses_avx512() {
  static const bool avx512 =
      (static_cast<unsigned>(dnnl_get_effective_cpu_isa()) & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  return avx512;
}

/// Held while a oneDNN primitive (or primitive descriptor) is made, so that no thread is inside oneDNN's own locks
/// when the process forks (Note [oneDNN across fork] in onednn.cpp).
std::shared_lock<std::shared_mutex> creation_lock();

/// Registers a cache's mutex (a function-local static) to be taken and given back around fork().
void hold_across_fork(std::mutex& cache_mutex);

}  // namespace strata::cpu
