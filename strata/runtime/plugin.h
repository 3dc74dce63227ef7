#pragma once

#include <cctype>
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

/// The device type's name in messages and tables: "CUDA" for cuda, "HIP" for hip.
inline std::string display_name(DeviceType type) {
  std::string name(device_type_name(type));
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

/// A GPU runtime's version number as people write it: CUDA's 13000 as "13.0", HIP's 50221153 (major * 10^7 +
/// minor * 10^5 + patch) as "5.2"; "-" when unknown (0).
inline std::string gpu_version_text(DeviceType type, int version) {
  if (version <= 0) return "-";
  const bool hip = type == DeviceType::HIP;
  const int major = hip ? version / 10000000 : version / 1000;
  const int minor = hip ? version % 10000000 / 100000 : version % 1000 / 10;
  return std::to_string(major) + "." + std::to_string(minor);
}

/// The file of a device type's plugin: libstrata_<type>.so, e.g. libstrata_cuda.so.
inline std::string plugin_file(DeviceType type) { return "libstrata_" + std::string(device_type_name(type)) + ".so"; }

/// The folders a plugin is looked for in, in order: those of $STRATA_BACKEND_PATH, then libstrata's own.
std::vector<std::filesystem::path> plugin_folders();

/// dlopens the first plugin_file(type) found in plugin_folders(); nullptr with `reason` set when none is found (the
/// folders looked in) or it does not load. The registry takes the backend from it, jit::device_compiler the compiler.
void* open_plugin(DeviceType type, std::string& reason);

/// Index to pass to Backend methods; "cuda" must be resolved first.
inline int backend_index(Device device) { return device.index() < 0 ? 0 : device.index(); }

}  // namespace strata
