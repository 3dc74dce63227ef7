#pragma once

#include <cstddef>
#include <string>

#include "strata/core/device.h"
#include "strata/core/error.h"

namespace strata {

/// What a backend reports about one of its devices.
struct DeviceProperties {
  std::string name;
  std::size_t total_memory = 0;
  int compute_capability_major = 0;  // 0 for the CPU
  int compute_capability_minor = 0;
  int multiprocessor_count = 0;  // CPU: logical cores this process may use
  int driver_version = 0;        // the vendor's own number (CUDA's 13000 is 13.0); Backend::version_text
  int runtime_version = 0;       // writes it as people do; 0 for the CPU
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

// Note [Required and optional backend capabilities]
// A backend for a new device must provide what runtime/ calls on every device: its type, how many devices there
// are, their properties and memory, raw allocation, copies, synchronize_device (synchronize(device)) and
// current_device (resolve() asks it for a device named without an index). Those are pure virtual. Everything
// else is an optional capability, each with a default that throws NotImplementedError naming the backend and the
// capability, "cuda backend: events are not supported (record_event)", as c10's DeviceGuardImplInterface does:
// streams, events, event timing, pinned memory, device selection and peer access. A device that lacks one still
// runs ops on its default stream (NativeStream nullptr); what needs the capability fails with a message that says
// which one is missing, rather than silently doing nothing. What relies on which capability:
// - streams: Stream::create, Stream::synchronize and Stream::query;
// - events: Event, Stream::wait, the allocator's record_stream, copies between two devices of one backend;
// - pinned memory: pin_memory(), non-blocking copies and the slots of STRATA_KERNEL_ASSERT (a backend whose
//   kernels use device-side asserts needs it);
// - device selection: strata::cuda::set_device and DeviceGuard;
// - peer access: the can_access_peer query.
// The release half of a pair (destroy_stream, destroy_event, free_pinned) does nothing by default: its acquire
// half throws, so no handle can exist, and releases run in destructors, where a throw would end the process.
class Backend {
 public:
  virtual ~Backend() = default;

  // ---- required: every backend implements these ----

  virtual DeviceType type() const = 0;
  virtual int device_count() const = 0;
  virtual DeviceProperties properties(int index) const = 0;
  virtual MemoryInfo memory_info(int index) const = 0;

  /// Raw device memory. Returns nullptr when the device has no memory left; throws BackendError otherwise.
  virtual void* raw_allocate(int index, std::size_t bytes) = 0;
  virtual void raw_free(int index, void* ptr, std::size_t bytes) = 0;

  /// Copies bytes between any two places of which at least one is this backend's device (the other may be the
  /// CPU or, for peer copies, another device of this backend). Ordered on `stream`; returns before the copy ends
  /// unless `blocking`.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes,
                    NativeStream stream, bool blocking) = 0;

  /// Waits for all work on the device, every stream included.
  virtual void synchronize_device(int index) = 0;
  /// The device that "type" without an index means for the calling thread.
  virtual int current_device() const = 0;

  // ---- optional capabilities: the defaults throw NotImplementedError (Note [Required and optional backend
  // capabilities]). They are defined here, inline, so that Backend keeps no key function: the CUDA plugin is
  // compiled with hidden visibility and gets its own copy of the vtable, as it did when every method was pure. ----

  /// Page-locked host memory for fast and asynchronous host↔device copies (plain memory on the CPU backend).
  /// Returns nullptr when the host cannot give or pin that much; throws BackendError otherwise.
  virtual void* allocate_pinned(std::size_t) { unsupported("pinned memory is not supported", "allocate_pinned"); }
  virtual void free_pinned(void*) {}
  /// True when allocate_pinned gives memory this backend's devices copy from and to asynchronously: the pinned
  /// allocator (runtime/pinned.cpp) then takes its memory from this backend. False for the CPU, whose "pinned"
  /// memory is plain.
  virtual bool supports_pinned_memory() const { return false; }

  virtual NativeStream create_stream(int) { unsupported("streams are not supported", "create_stream"); }
  virtual void destroy_stream(int, NativeStream) {}
  virtual void synchronize_stream(int, NativeStream) { unsupported("streams are not supported", "synchronize_stream"); }
  /// True when all work on the stream has finished.
  virtual bool query_stream(int, NativeStream) { unsupported("streams are not supported", "query_stream"); }

  virtual NativeEvent create_event(int) { unsupported("events are not supported", "create_event"); }
  virtual void destroy_event(int, NativeEvent) {}
  virtual void record_event(int, NativeEvent, NativeStream) { unsupported("events are not supported", "record_event"); }
  /// Makes `stream` wait for `event` without blocking the host.
  virtual void wait_event(int, NativeStream, NativeEvent) { unsupported("events are not supported", "wait_event"); }
  virtual void synchronize_event(int, NativeEvent) { unsupported("events are not supported", "synchronize_event"); }
  virtual bool query_event(int, NativeEvent) { unsupported("events are not supported", "query_event"); }
  /// Milliseconds between two recorded events.
  virtual float elapsed_ms(int, NativeEvent, NativeEvent) {
    unsupported("event timing is not supported", "elapsed_ms");
  }

  /// Makes `index` the device that "type" without an index means for the calling thread.
  virtual void set_current_device(int) { unsupported("device selection is not supported", "set_current_device"); }
  /// True when device `index` can read and write the memory of device `peer` directly.
  virtual bool can_access_peer(int, int) const { unsupported("peer access is not supported", "can_access_peer"); }

  /// A driver_version or runtime_version of DeviceProperties as the vendor writes it ("13.0" for CUDA's 13000);
  /// "-" for 0 (unknown). The default writes the number as it is.
  virtual std::string version_text(int version) const { return version <= 0 ? "-" : std::to_string(version); }

 protected:
  /// Throws NotImplementedError "<type> backend: <what> (<method>)", e.g. what = "events are not supported".
  [[noreturn]] void unsupported(const char* what, const char* method) const {
    STRATA_THROW(NotImplementedError, "{} backend: {} ({})", device_type_name(type()), what, method);
  }
};

}  // namespace strata
