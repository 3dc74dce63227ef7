#include "strata/runtime/registry.h"

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <vector>

#include "strata/backends/cpu/cpu_backend.h"
#include "strata/core/error.h"
#include "strata/runtime/cpu_devices.h"
#include "strata/runtime/plugin.h"

namespace strata {

namespace {

// Note [Finding a backend without a lock]
// Every op asks for its device's backend (current_stream, the allocator, Stream::synchronize), from any thread, so
// find_backend reads an atomic pointer and takes no lock. Installing one is rare (the CPU backend at start-up, the
// CUDA plugin once, tests and embedders) and goes through the mutex. A replaced backend is retired, not destroyed:
// a thread may still be using the pointer it read a moment before. Retired backends are destroyed at exit, with the
// registry.
struct Registry {
  std::mutex mutex;  // guards `installed`, `reasons` and installing
  std::array<std::atomic<Backend*>, kDeviceTypeCount> backends{};
  std::vector<std::unique_ptr<Backend>> installed;  // owns every backend ever installed, retired ones included
  std::array<std::string, kDeviceTypeCount> reasons;
  // A plugin is looked for once per device type. Not std::call_once: it reads libstdc++'s own thread-locals, which
  // this library's initial-exec TLS model (strata/CMakeLists.txt) would then need in static TLS, and a process that
  // loaded libstdc++ before with dlopen (importing PyTorch first) could not load libstrata at all.
  std::mutex load_mutex;
  std::array<std::atomic<bool>, kDeviceTypeCount> looked_for{};

  Registry() { install(DeviceType::CPU, make_cpu_backend()); }
  // Newest first, the reverse of installing, as members are destroyed: the CUDA plugin goes before the CPU backend.
  ~Registry() {
    while (!installed.empty()) installed.pop_back();
  }

  /// Called with the mutex held (or from the constructor).
  void install(DeviceType type, std::unique_ptr<Backend> backend) {
    backends[static_cast<int>(type)].store(backend.get(), std::memory_order_release);
    if (backend) installed.push_back(std::move(backend));
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

// The folder libstrata was loaded from: plugins are installed beside it.
std::filesystem::path library_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&library_folder), &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

// Note [Loading a device's plugin]
// Every device type but the CPU is a separate library, libstrata_<type>.so (libstrata_cuda.so), so that one build
// runs on machines with and without the device, and plugins built against different vendor SDKs can sit side by
// side. On the first query of a device type we (1) check that the vendor's driver library loads, where the type
// has one (device_driver_library in core/device.h: before the plugin is opened, since opening it would load the
// vendor's other libraries for nothing, or fail where the plugin links the driver's), loading it RTLD_GLOBAL so
// that the plugin's runtime finds it, (2) look for its plugin in $STRATA_BACKEND_PATH and then next to libstrata,
// (3) dlopen it and check its ABI version (Note [The plugin ABI version] in plugin.h), (4) call its entry point,
// which may still decline (no device, driver too old). Every failure is kept as a one-line reason per device type for
// unavailable_reason() and strata-smi; nothing aborts. A device type with no plugin installed says so, naming the
// folders it looked in.

std::unique_ptr<Backend> load_plugin(DeviceType type, std::string& reason) {
  if (const DriverLibrary driver = device_driver_library(type); !driver.file.empty()) {
    if (dlopen(std::string(driver.file).c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* err = dlerror();
      reason = fmt::format("{} {} could not be loaded ({})", driver.description, driver.file, err ? err : "not found");
      return nullptr;
    }
  }
  void* handle = open_plugin(type, reason);
  if (handle == nullptr) return nullptr;
  const std::string name = display_name(type);
  auto create = reinterpret_cast<CreateBackendFn>(dlsym(handle, kCreateBackendSymbol));
  if (create == nullptr) {
    reason = fmt::format("the {} plugin {} has no entry point {}", name, plugin_file(type), kCreateBackendSymbol);
    return nullptr;
  }
  std::string why;
  Backend* created = create(&why);
  if (created == nullptr) {
    reason = why.empty() ? fmt::format("the {} plugin declined to start", name) : why;
    return nullptr;
  }
  return std::unique_ptr<Backend>(created);
}

void ensure_loaded(Registry& r, DeviceType type) {
  if (type == DeviceType::CPU) return;  // built in (Registry's constructor)
  std::atomic<bool>& looked_for = r.looked_for[static_cast<int>(type)];
  if (looked_for.load(std::memory_order_acquire)) return;
  std::lock_guard load_lock(r.load_mutex);  // the first caller looks; the others wait for it
  if (looked_for.load(std::memory_order_relaxed)) return;
  std::string reason;
  auto loaded = load_plugin(type, reason);
  {
    std::lock_guard lock(r.mutex);
    if (r.backends[static_cast<int>(type)].load() == nullptr) {  // else a test or an embedder was first
      r.install(type, std::move(loaded));
      r.reasons[static_cast<int>(type)] = reason;
    }
  }
  looked_for.store(true, std::memory_order_release);
}

}  // namespace

std::vector<std::filesystem::path> plugin_folders() {
  std::vector<std::filesystem::path> folders;
  if (const char* env = std::getenv("STRATA_BACKEND_PATH")) {
    std::stringstream list(env);
    std::string item;
    while (std::getline(list, item, ':')) {
      if (!item.empty()) folders.emplace_back(item);
    }
  }
  folders.push_back(library_folder());
  return folders;
}

void* open_plugin(DeviceType type, std::string& reason) {
  const std::string name = display_name(type), file = plugin_file(type);
  std::vector<std::string> tried;
  for (const auto& folder : plugin_folders()) {
    const auto path = folder / file;
    std::error_code ec;  // a folder of STRATA_BACKEND_PATH in a symlink loop, or a name too long, is not found
    if (!std::filesystem::exists(path, ec)) {
      tried.push_back(ec ? fmt::format("{} ({})", folder.string(), ec.message()) : folder.string());
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      reason =
          fmt::format("the {} plugin {} could not be loaded: {}", name, path.string(), err ? err : "unknown error");
      return nullptr;
    }
    // A plugin of another ABI stays mapped (its constructors have run, dlclose would not undo them) but unused.
    return check_plugin_abi(handle, path, type, reason) ? handle : nullptr;
  }
  reason = fmt::format("the {} plugin {} was not found (looked in: {}); this build has no {} support", name, file,
                       fmt::join(tried, ", "), name);
  return nullptr;
}

bool check_plugin_abi(void* handle, const std::filesystem::path& path, DeviceType type, std::string& reason) {
  auto version = reinterpret_cast<PluginAbiVersionFn>(dlsym(handle, kPluginAbiVersionSymbol));
  if (version == nullptr) {
    reason = fmt::format(
        "the {} plugin {} has no {}: it was built for another version of libstrata, which expects "
        "plugin ABI version {}; rebuild the plugin with this libstrata",
        display_name(type), path.string(), kPluginAbiVersionSymbol, kPluginAbiVersion);
    return false;
  }
  const int found = version();
  if (found != kPluginAbiVersion) {
    reason = fmt::format(
        "the {} plugin {} has plugin ABI version {}, but this libstrata expects version {}; rebuild "
        "the plugin with this libstrata",
        display_name(type), path.string(), found, kPluginAbiVersion);
    return false;
  }
  return true;
}

Backend* find_backend(DeviceType type) {
  auto& r = registry();
  ensure_loaded(r, type);
  return r.backends[static_cast<int>(type)].load(std::memory_order_acquire);
}

std::string unavailable_reason(DeviceType type) {
  auto& r = registry();
  ensure_loaded(r, type);
  std::lock_guard lock(r.mutex);
  if (r.backends[static_cast<int>(type)].load() != nullptr) return {};
  const auto& reason = r.reasons[static_cast<int>(type)];
  return reason.empty() ? fmt::format("no {} backend is registered", device_type_name(type)) : reason;
}

Backend& backend(DeviceType type) {
  Backend* b = find_backend(type);
  STRATA_CHECK(b != nullptr, DeviceUnavailableError, "{} devices are unavailable: {}", device_type_name(type),
               unavailable_reason(type));
  return *b;
}

int device_count(DeviceType type) {
  Backend* b = find_backend(type);
  return b ? b->device_count() : 0;
}

Device resolve(Device device) {
  if (device.has_index()) return device;  // every CPU device has one
  return Device(device.type(), backend(device.type()).current_device());
}

void check_device(Device device) {
  Backend* b = find_backend(device.type());
  STRATA_CHECK(b != nullptr, DeviceUnavailableError, "device {} is unavailable: {}", device,
               unavailable_reason(device.type()));
  if (!device.has_index()) return;
  const int count = b->device_count();
  if (device.is_cpu()) {
    STRATA_CHECK(device.index() < count, DeviceUnavailableError,
                 "device {} is unavailable: there {} {} CPU device(s) (cpu:0..cpu:{}); {}=N sets how many, before the "
                 "program starts",
                 device, count == 1 ? "is" : "are", count, count - 1, kCpuDevicesVariable);
    return;
  }
  STRATA_CHECK(device.index() < count, DeviceUnavailableError,
               "device {} is unavailable: this machine has {} {} device(s) (valid indices 0..{})", device, count,
               device_type_name(device.type()), count - 1);
}

Backend& backend(Device device) {
  check_device(device);
  return *find_backend(device.type());
}

void register_backend(DeviceType type, std::unique_ptr<Backend> backend) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.install(type, std::move(backend));
  r.reasons[static_cast<int>(type)].clear();
}

}  // namespace strata
