#pragma once

#include <string>

#include "strata/runtime/backend.h"

namespace strata {

// The contract between libstrata and a backend plugin (see Note [Loading the CUDA plugin] in registry.cpp).
// The plugin exports `extern "C" Backend* strata_create_backend(std::string* why_not)`: it returns a new backend
// (ownership passes to the caller) or nullptr with a one-line reason. Plugin and library are built together.
using CreateBackendFn = Backend* (*)(std::string* why_not);
inline constexpr const char* kCreateBackendSymbol = "strata_create_backend";
inline constexpr const char* kCudaPluginFile = "libstrata_cuda.so";

/// Index to pass to Backend methods; "cuda" must be resolved first.
inline int backend_index(Device device) { return device.index() < 0 ? 0 : device.index(); }

}  // namespace strata
