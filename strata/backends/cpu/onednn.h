#pragma once

// What the CPU kernels on oneDNN share (conv.cpp, matmul.cpp). Included only where STRATA_HAVE_DNNL is set.

#include <oneapi/dnnl/dnnl.hpp>

namespace strata::cpu {

// Note [oneDNN objects live until the process ends]
// The engine and the caches of primitives are made on first use and never destroyed. Destroyed at exit, they would
// go in the reverse order of their making: the engine, made while the first primitive was, before the cache that
// holds that primitive, whose destruction then freed memory the engine had already freed ("double free or
// corruption", an abort after a run's last line, now and then). Freeing them at exit gains nothing; LeakSanitizer
// still sees them reachable.

/// The CPU engine every oneDNN primitive and memory of Strata's is made with.
inline const dnnl::engine& cpu_engine() {
  static const dnnl::engine* const engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

}  // namespace strata::cpu
