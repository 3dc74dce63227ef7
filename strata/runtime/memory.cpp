// The per-device allocators behind allocate(), memory_stats() and friends (declared at the end of allocator.h).
#include <mutex>
#include <unordered_map>
#include <vector>

#include "strata/core/error.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/cpu_devices.h"
#include "strata/runtime/memory_limit.h"
#include "strata/runtime/plugin.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/stream.h"

namespace strata {

namespace {

struct DeviceAllocators {
  std::mutex mutex;
  std::unordered_map<Device, std::unique_ptr<CachingAllocator>> by_device;
};

// Note [Device allocators live until the process ends]
// Tensors held by static objects may be freed after main() returns, and the backends that memory goes back to
// are statics themselves, destroyed in an order we do not control. So the allocators are never destroyed: the
// operating system takes the memory back at exit, as with PyTorch's CUDA caching allocator.
DeviceAllocators& device_allocators() {
  static DeviceAllocators* const all = std::make_unique<DeviceAllocators>().release();
  return *all;
}

std::size_t total_memory(Device device) { return backend(device).memory_info(backend_index(device)).total; }

}  // namespace

CachingAllocator& allocator(Device device) {
  device = resolve(device);
  // Allocators live until the process ends, so each thread remembers the last one it used: the common case takes
  // no lock (every op allocates its result; the registry's and this map's locks were a fifth of a 16-element add).
  thread_local Device last_device;
  thread_local CachingAllocator* last = nullptr;
  if (last != nullptr && device == last_device) return *last;
  Backend& device_backend = backend(device);  // throws DeviceUnavailableError for absent devices
  DeviceAllocators& all = device_allocators();
  std::lock_guard lock(all.mutex);
  auto it = all.by_device.find(device);
  if (it == all.by_device.end()) {
    if (device.is_cpu()) detail::fix_cpu_device_count();  // Note [Virtual CPU devices]
    auto created = std::make_unique<CachingAllocator>(make_backend_memory_resource(device_backend, device));
    // A malformed STRATA_MEMORY_LIMIT throws here, on every use of the device, until it is fixed.
    if (const auto limit = memory_limit_from_environment(device)) {
      created->set_limit(limit->bytes ? *limit->bytes : limit->resolve(total_memory(device)));
    }
    it = all.by_device.emplace(device, std::move(created)).first;
  }
  last_device = device;
  last = it->second.get();
  return *last;
}

DataPtr allocate(Device device, std::size_t bytes) {
  device = resolve(device);
  return allocator(device).allocate(bytes, current_native_stream(device));
}

MemoryStats memory_stats(Device device) { return allocator(device).stats(); }

void reset_peak_stats(Device device) { allocator(device).reset_peak_stats(); }

void empty_cache(std::optional<Device> device) {
  if (device) {
    allocator(*device).empty_cache();
    return;
  }
  std::vector<CachingAllocator*> existing;
  {
    DeviceAllocators& all = device_allocators();
    std::lock_guard lock(all.mutex);
    for (const auto& [d, a] : all.by_device) existing.push_back(a.get());
  }
  for (CachingAllocator* a : existing) a->empty_cache();
}

void set_memory_limit(Device device, std::size_t bytes) { allocator(device).set_limit(bytes); }

void set_memory_fraction(Device device, double fraction) {
  device = resolve(device);
  STRATA_CHECK(fraction > 0.0 && fraction <= 1.0, InvalidArgumentError,
               "set_memory_fraction: the fraction for {} must be in (0, 1], not {}", device, fraction);
  CachingAllocator& a = allocator(device);
  a.set_limit(MemoryLimit{device, std::nullopt, fraction}.resolve(total_memory(device)));
}

void clear_memory_limit(Device device) { allocator(device).set_limit(std::nullopt); }

std::string memory_summary(Device device) { return allocator(device).summary(); }

}  // namespace strata
