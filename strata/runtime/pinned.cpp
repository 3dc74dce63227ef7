#include "strata/runtime/pinned.h"

#include "strata/runtime/registry.h"
#include "strata/runtime/stream_uses.h"

namespace strata {

namespace {

// The backend that allocates pinned memory: the first device type, in the enum's order, whose backend is available
// and supports it (Backend::supports_pinned_memory); the CPU backend, whose pinned memory is plain, when none does.
Backend* pinning_backend() {
  for (int t = 0; t < kDeviceTypeCount; ++t) {
    const auto type = static_cast<DeviceType>(t);
    if (type == DeviceType::CPU) continue;
    Backend* b = find_backend(type);
    if (b != nullptr && b->supports_pinned_memory()) return b;
  }
  return &strata::backend(DeviceType::CPU);
}

// Pinned memory is host memory: its device is the CPU, but the GPU backend allocates it so the driver knows it.
class PinnedResource final : public MemoryResource {
 public:
  PinnedResource() : backend_(pinning_backend()) {}
  Device device() const override { return kCPU; }
  void* allocate(std::size_t bytes) override { return backend_->allocate_pinned(bytes); }
  void free(void* ptr, std::size_t) override { backend_->free_pinned(ptr); }
  MemoryInfo memory_info() const override { return strata::backend(DeviceType::CPU).memory_info(0); }
  // GPU streams copy from and to this memory after the calls that queue the copies return.
  StreamEvents* stream_events() override { return &backend_stream_events(); }

 private:
  Backend* backend_;
};

}  // namespace

CachingAllocator& pinned_allocator() {
  static CachingAllocator allocator(std::make_unique<PinnedResource>());
  return allocator;
}

DataPtr allocate_pinned(std::size_t bytes) { return pinned_allocator().allocate(bytes); }

}  // namespace strata
