// A plugin built for another libstrata (tests/runtime/plugin_abi_test.cpp): its ABI version is one past this
// library's, and its entry point must never be called.
#include <string>

#include "strata/core/macros.h"
#include "strata/runtime/plugin.h"

extern "C" STRATA_EXPORT int strata_plugin_abi_version() { return strata::kPluginAbiVersion + 1; }

extern "C" STRATA_EXPORT strata::Backend* strata_create_backend(std::string* why_not) {
  if (why_not != nullptr) *why_not = "the entry point of a plugin of another ABI version was called";
  return nullptr;
}
