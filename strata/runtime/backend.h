#pragma once

#include <cstddef>
#include <string>

#include "strata/core/device.h"

namespace strata {

/// What a backend reports about one of its devices.
struct DeviceProperties {
  std::string name;
  std::size_t total_memory = 0;
  int compute_capability_major = 0;  // 0 for the CPU
  int compute_capability_minor = 0;
  int multiprocessor_count = 0;      // CPU: logical cores this process may use
  int driver_version = 0;            // CUDA style: 13000 is 13.0; 0 for the CPU
  int runtime_version = 0;
};

/// Device memory as the device sees it (all processes together).
struct MemoryInfo {
  std::size_t total = 0;
  std::size_t free = 0;
};

/// A backend's own stream and event handles (cudaStream_t, cudaEvent_t); nullptr is the default stream.
using NativeStream = void*;
using NativeEvent = void*;

// Note [Backends are small]
// A backend supplies only what differs between device kinds: raw memory, copies, streams, events and properties.
// Caching, statistics, limits and counting live once in runtime/ above this interface (see allocator.h and
// transfer.h); ops are registered separately in the op table (ops/). Index arguments are always concrete
// (>= 0); the registry resolves "cuda" to the current device before calling in.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceType type() const = 0;
  virtual int device_count() const = 0;
  virtual DeviceProperties properties(int index) const = 0;
  virtual MemoryInfo memory_info(int index) const = 0;

  /// Raw device memory. Returns nullptr when the device has no memory left; throws BackendError otherwise.
  virtual void* raw_allocate(int index, std::size_t bytes) = 0;
  virtual void raw_free(int index, void* ptr, std::size_t bytes) = 0;

  /// Page-locked host memory for fast and asynchronous host↔device copies (plain memory on the CPU backend).
  /// Returns nullptr when the host cannot give or pin that much; throws BackendError otherwise.
  virtual void* allocate_pinned(std::size_t bytes) = 0;
  virtual void free_pinned(void* ptr) = 0;

  /// Copies bytes between any two places of which at least one is this backend's device (the other may be the
  /// CPU or, for peer copies, another device of this backend). Ordered on `stream`; returns before the copy ends
  /// unless `blocking`.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes,
                    NativeStream stream, bool blocking) = 0;

  virtual NativeStream create_stream(int index) = 0;
  virtual void destroy_stream(int index, NativeStream stream) = 0;
  virtual void synchronize_stream(int index, NativeStream stream) = 0;
  /// True when all work on the stream has finished.
  virtual bool query_stream(int index, NativeStream stream) = 0;

  virtual NativeEvent create_event(int index) = 0;
  virtual void destroy_event(int index, NativeEvent event) = 0;
  virtual void record_event(int index, NativeEvent event, NativeStream stream) = 0;
  /// Makes `stream` wait for `event` without blocking the host.
  virtual void wait_event(int index, NativeStream stream, NativeEvent event) = 0;
  virtual void synchronize_event(int index, NativeEvent event) = 0;
  virtual bool query_event(int index, NativeEvent event) = 0;
  /// Milliseconds between two recorded events.
  virtual float elapsed_ms(int index, NativeEvent start, NativeEvent end) = 0;

  virtual void synchronize_device(int index) = 0;
  virtual int current_device() const = 0;
  virtual void set_current_device(int index) = 0;
  virtual bool can_access_peer(int index, int peer) const = 0;
};

}  // namespace strata
