#pragma once

// How the GPU plugin writes its vendor's version numbers (Backend::version_text), in a header of its own so that
// tests check the formulas without a GPU compiler.

#include <string>

namespace strata::cuda {

/// CUDA's version number as people write it: 13000 as "13.0", 12080 as "12.8"; "-" when unknown (0).
inline std::string cuda_version_text(int version) {
  if (version <= 0) return "-";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

/// HIP's version number (major * 10^7 + minor * 10^5 + patch) as people write it: 50221153 as "5.2"; "-" when
/// unknown (0).
inline std::string hip_version_text(int version) {
  if (version <= 0) return "-";
  return std::to_string(version / 10000000) + "." + std::to_string(version % 10000000 / 100000);
}

}  // namespace strata::cuda
