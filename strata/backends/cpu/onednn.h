#pragma once

// What the CPU kernels on oneDNN share (conv.cpp, matmul.cpp). Included only where STRATA_HAVE_DNNL is set.

#include <oneapi/dnnl/dnnl.hpp>

namespace strata::cpu {

/// The CPU engine every oneDNN primitive and memory of Strata's is made with.
inline const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

}  // namespace strata::cpu
