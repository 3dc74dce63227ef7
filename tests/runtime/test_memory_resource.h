#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "strata/runtime/allocator.h"

namespace strata::testing {

/// A MemoryResource with a chosen capacity, so that out-of-memory, limits and fragmentation are testable without
/// a GPU. It counts calls and checks that every free names a live pointer with the size it was allocated with.
/// With `backed`, the memory is real (aligned_alloc) and may be written; otherwise the addresses are made up and
/// must not be touched, which allows capacities far beyond this machine's memory.
class TestMemoryResource final : public MemoryResource {
 public:
  struct Counters {
    std::size_t used = 0;
    int64_t allocations = 0;         // successful allocate() calls
    int64_t failed_allocations = 0;  // allocate() calls answered with nullptr
    int64_t frees = 0;
    int64_t bad_frees = 0;  // frees of unknown pointers or with the wrong size
  };

  explicit TestMemoryResource(std::size_t capacity, Device device = Device(DeviceType::CUDA, 0), bool backed = false)
      : capacity_(capacity), device_(device), backed_(backed) {}
  ~TestMemoryResource() override {
    for (const auto& [ptr, bytes] : live_) release(ptr);
  }

  Device device() const override { return device_; }

  void* allocate(std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    if (bytes > capacity_ - counters_.used) {
      ++counters_.failed_allocations;
      return nullptr;
    }
    void* ptr = nullptr;
    if (backed_) {
      ptr = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
      if (ptr == nullptr) return nullptr;
    } else {
      ptr = reinterpret_cast<void*>(next_address_);  // NOLINT: made-up addresses, never dereferenced
      next_address_ += (bytes + kAlignment - 1) / kAlignment * kAlignment + kAlignment;
    }
    live_.emplace(ptr, bytes);
    counters_.used += bytes;
    ++counters_.allocations;
    return ptr;
  }

  void free(void* ptr, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    const auto it = live_.find(ptr);
    if (it == live_.end() || it->second != bytes) {
      ++counters_.bad_frees;
      return;
    }
    counters_.used -= bytes;
    ++counters_.frees;
    live_.erase(it);
    release(ptr);
  }

  MemoryInfo memory_info() const override {
    std::lock_guard lock(mutex_);
    return {capacity_, capacity_ - counters_.used};
  }

  Counters counters() const {
    std::lock_guard lock(mutex_);
    return counters_;
  }

  /// Gives record_stream these events (none by default); set it before the allocator is made.
  void set_stream_events(StreamEvents* events) { events_ = events; }
  StreamEvents* stream_events() override { return events_; }

 private:
  static constexpr std::size_t kAlignment = 512;
  void release(void* ptr) const {
    if (backed_) std::free(ptr);
  }

  mutable std::mutex mutex_;
  std::size_t capacity_;
  Device device_;
  bool backed_;
  std::uintptr_t next_address_ = std::uintptr_t{1} << 44;
  std::map<void*, std::size_t> live_;
  Counters counters_;
  StreamEvents* events_ = nullptr;
};

/// A caching allocator over a TestMemoryResource (on cuda:0 by name), keeping a view of the resource's counters.
struct TestAllocator {
  explicit TestAllocator(std::size_t capacity = std::size_t{1} << 30, bool backed = false)
      : TestAllocator(std::make_unique<TestMemoryResource>(capacity, Device(DeviceType::CUDA, 0), backed)) {}
  explicit TestAllocator(std::unique_ptr<TestMemoryResource> owned)
      : resource(owned.get()), allocator(std::move(owned)) {}
  TestMemoryResource* resource;
  CachingAllocator allocator;
};

/// Two distinct stream identities; the allocator only compares them.
inline NativeStream stream_a() { return reinterpret_cast<NativeStream>(0x1000); }  // NOLINT
inline NativeStream stream_b() { return reinterpret_cast<NativeStream>(0x2000); }  // NOLINT

}  // namespace strata::testing
