#pragma once

// Finding a device type's plugin as the registry does, and calling its entry point directly (the plugin tests of
// cuda_backend_test.cpp and hip_backend_test.cpp).

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "strata/runtime/plugin.h"

namespace strata::testing {

/// The plugin of `type` where the registry looks for it (plugin_folders()); empty when this build has none.
inline std::filesystem::path find_plugin(DeviceType type) {
  for (const auto& folder : plugin_folders()) {
    if (std::filesystem::exists(folder / plugin_file(type))) return folder / plugin_file(type);
  }
  return {};
}

/// What a plugin's entry point answered: a backend, or nullptr and why not.
struct PluginAnswer {
  std::unique_ptr<Backend> created;
  std::string why_not;
};

/// Opens the plugin at `path` (the registry may have loaded it already; dlopen then hands back the same library)
/// and calls its entry point. A library that does not open or has no entry point fails the test.
inline PluginAnswer call_entry_point(const std::filesystem::path& path) {
  PluginAnswer answer;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    ADD_FAILURE() << dlerror();
    return answer;
  }
  auto create = reinterpret_cast<CreateBackendFn>(dlsym(handle, kCreateBackendSymbol));
  if (create == nullptr) {
    ADD_FAILURE() << path << " has no " << kCreateBackendSymbol;
    return answer;
  }
  answer.created.reset(create(&answer.why_not));
  return answer;
}

}  // namespace strata::testing
