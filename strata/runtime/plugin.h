#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "strata/runtime/backend.h"

namespace strata {

// The contract between libstrata and a backend plugin (see Note [Loading a device's plugin] in registry.cpp).
// The plugin exports `extern "C" Backend* strata_create_backend(std::string* why_not)`: it returns a new backend
// (ownership passes to the caller) or nullptr with a one-line reason. Plugin and library are built together.
using CreateBackendFn = Backend* (*)(std::string* why_not);
inline constexpr const char* kCreateBackendSymbol = "strata_create_backend";

/// The file of a device type's plugin: libstrata_<type>.so, e.g. libstrata_cuda.so.
inline std::string plugin_file(DeviceType type) { return "libstrata_" + std::string(device_type_name(type)) + ".so"; }

/// The folders a plugin is looked for in, in order: those of $STRATA_BACKEND_PATH, then libstrata's own.
std::vector<std::filesystem::path> plugin_folders();

/// Index to pass to Backend methods; "cuda" must be resolved first.
inline int backend_index(Device device) { return device.index() < 0 ? 0 : device.index(); }

}  // namespace strata
