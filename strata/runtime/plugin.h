#pragma once

#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "strata/core/macros.h"
#include "strata/runtime/backend.h"

namespace strata {

// The contract between libstrata and a backend plugin (see Note [Loading a device's plugin] in registry.cpp).
// The plugin exports `extern "C" Backend* strata_create_backend(std::string* why_not)`: it returns a new backend
// (ownership passes to the caller) or nullptr with a one-line reason. Plugin and library are built together.
using CreateBackendFn = Backend* (*)(std::string* why_not);
inline constexpr const char* kCreateBackendSymbol = "strata_create_backend";

// Note [The plugin ABI version]
// A plugin calls into libstrata and implements its classes (Backend, CollectiveLibrary, the op table's kernels)
// through C++ vtables and struct layouts that nothing checks at load: a plugin built against another libstrata would
// load, then call the wrong virtual or read a field at the wrong offset. So each plugin exports
// `extern "C" int strata_plugin_abi_version()` (STRATA_DEFINE_PLUGIN_ABI_VERSION below), which returns the
// kPluginAbiVersion it was compiled with, and open_plugin refuses a plugin whose number is missing or differs, with
// a reason naming the file, its version and the expected one. Raise kPluginAbiVersion whenever a change to
// runtime/backend.h, runtime/collectives.h, the op table (ops/kernel_table.h) or this contract would break a plugin
// built before it.
inline constexpr int kPluginAbiVersion = 1;
using PluginAbiVersionFn = int (*)();
inline constexpr const char* kPluginAbiVersionSymbol = "strata_plugin_abi_version";

/// The device type's name in messages and tables: "CUDA" for cuda, "HIP" for hip.
inline std::string display_name(DeviceType type) {
  std::string name(device_type_name(type));
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

/// The file of a device type's plugin: libstrata_<type>.so, e.g. libstrata_cuda.so.
inline std::string plugin_file(DeviceType type) { return "libstrata_" + std::string(device_type_name(type)) + ".so"; }

/// The folders a plugin is looked for in, in order: those of $STRATA_BACKEND_PATH, then libstrata's own.
std::vector<std::filesystem::path> plugin_folders();

/// dlopens the first plugin_file(type) found in plugin_folders(); nullptr with `reason` set when none is found (the
/// folders looked in) or it does not load. The registry takes the backend from it, jit::device_compiler the compiler.
void* open_plugin(DeviceType type, std::string& reason);

/// Checks that the plugin `handle`, opened from `path`, was built for this libstrata's kPluginAbiVersion; false with
/// `reason` set (naming the file, its version and the expected one) when it was not. open_plugin calls it.
bool check_plugin_abi(void* handle, const std::filesystem::path& path, DeviceType type, std::string& reason);

/// Index to pass to Backend methods; "cuda" must be resolved first.
inline int backend_index(Device device) { return device.index() < 0 ? 0 : device.index(); }

}  // namespace strata

/// Defines the plugin's strata_plugin_abi_version() (Note [The plugin ABI version]), exported although plugins are
/// built with hidden visibility. Once per plugin, at namespace scope.
#define STRATA_DEFINE_PLUGIN_ABI_VERSION() \
  extern "C" STRATA_EXPORT int strata_plugin_abi_version() { return ::strata::kPluginAbiVersion; }
