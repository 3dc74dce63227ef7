// jit::device_compiler: the run-time compiler of a GPU plugin (strata/jit/compiler.h).

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/jit/compiler.h"
#include "strata/runtime/plugin.h"

namespace strata::jit {

namespace {

// Note [Finding a plugin's compiler]
// The compiler comes from the same plugin file as the device's backend (Note [Loading a device's plugin] in
// runtime/registry.cpp), looked for in the same folders, but without loading the vendor's driver library first:
// compiling for a named architecture must work on a machine without the GPU and its driver (a build machine, CI),
// and the plugins load without libcuda.so.1 (the CUDA plugin reaches the driver API through the runtime, Note [The
// driver API through the runtime]). dlopen of a file already loaded by the registry returns the same handle. Each
// device type is looked for once, under a mutex, and the answer (the compiler, or why there is none) kept for the
// process: not std::call_once, whose libstdc++ thread-locals this library's initial-exec TLS model cannot use (see
// Registry in registry.cpp). Compilers are never destroyed: modules they loaded may be alive until exit, and the
// plugin is never unloaded.
struct Compilers {
  std::mutex mutex;  // guards looking for a compiler and `reasons`
  std::array<std::atomic<DeviceCompiler*>, kDeviceTypeCount> compilers{};
  std::array<std::atomic<bool>, kDeviceTypeCount> looked_for{};
  std::array<std::string, kDeviceTypeCount> reasons;
};

Compilers& compilers() {
  static auto* c = new Compilers();  // never destroyed (Note [Finding a plugin's compiler])
  return *c;
}

DeviceCompiler* load_compiler(DeviceType type, std::string& reason) {
  void* handle = open_plugin(type, reason);
  if (handle == nullptr) return nullptr;
  const std::string name = display_name(type);
  auto create = reinterpret_cast<CreateCompilerFn>(dlsym(handle, kCreateCompilerSymbol));
  if (create == nullptr) {
    reason = fmt::format("the {} plugin {} has no run-time compiler (no entry point {})", name, plugin_file(type),
                         kCreateCompilerSymbol);
    return nullptr;
  }
  std::string why;
  DeviceCompiler* created = create(&why);
  if (created == nullptr) {
    reason = why.empty() ? fmt::format("the {} plugin's run-time compiler declined to start", name) : why;
    return nullptr;
  }
  return created;
}

}  // namespace

DeviceCompiler& device_compiler(DeviceType type) {
  STRATA_CHECK(type != DeviceType::CPU, InvalidArgumentError,
               "device_compiler(cpu): CPU kernels are compiled by libstrata with the host's C++ compiler, not by a "
               "plugin");
  Compilers& c = compilers();
  const auto slot = static_cast<std::size_t>(type);
  if (!c.looked_for[slot].load(std::memory_order_acquire)) {
    std::lock_guard lock(c.mutex);
    if (!c.looked_for[slot].load(std::memory_order_relaxed)) {
      std::string reason;
      c.compilers[slot].store(load_compiler(type, reason), std::memory_order_relaxed);
      c.reasons[slot] = std::move(reason);
      c.looked_for[slot].store(true, std::memory_order_release);
    }
  }
  DeviceCompiler* compiler = c.compilers[slot].load(std::memory_order_acquire);
  STRATA_CHECK(compiler != nullptr, DeviceUnavailableError, "kernels cannot be compiled for {}: {}",
               device_type_name(type), c.reasons[slot]);
  return *compiler;
}

}  // namespace strata::jit
