#pragma once

// The caching allocator's record of blocks used on streams other than their own (Note [Memory used on other
// streams] in allocator.h): the uses of a block while it is allocated, and the blocks freed while those streams may
// still read them.

#include <unordered_map>
#include <vector>

#include "strata/core/device.h"
#include "strata/runtime/allocator.h"

namespace strata {

/// A stream, other than the one a block was allocated for, that work using the block was queued on; `event` marks
/// how far that stream had got when the block was freed.
struct StreamUse {
  Device device;
  NativeStream stream = nullptr;
  NativeEvent event = nullptr;
};

/// The events of the registry's backends (for memory that real streams use: device memory, pinned memory).
StreamEvents& backend_stream_events();

/// Blocks freed while streams other than their own may still use them. Blocks are opaque here; the allocator owns
/// them and keeps them out of its pools until this hands them back. Not thread-safe: the allocator's lock guards it.
class PendingFrees {
 public:
  explicit PendingFrees(StreamEvents& events) : events_(events) {}
  ~PendingFrees();
  PendingFrees(const PendingFrees&) = delete;
  PendingFrees& operator=(const PendingFrees&) = delete;

  /// An event for a new use on `device`: a completed one kept for reuse, else a new one.
  NativeEvent take_event(Device device);
  /// Records each use's event on its stream; `block` waits until all have completed. When a record fails, the
  /// block's events are dropped and the error propagates: nothing will tell when the block is free.
  void add(void* block, std::vector<StreamUse> uses);
  bool empty() const { return pending_.empty(); }
  /// The blocks whose events have all completed, no longer pending.
  std::vector<void*> take_completed();
  /// Blocks the host until every pending event has completed; then every block, no longer pending.
  std::vector<void*> wait_all();
  /// Destroys an event taken for a use that will never be recorded (its block outlived the allocator).
  void destroy_event(Device device, NativeEvent event) noexcept;

 private:
  void keep(Device device, NativeEvent event);

  struct Pending {
    void* block;
    std::vector<StreamUse> uses;  // those whose events have not completed yet
  };
  StreamEvents& events_;
  std::vector<Pending> pending_;
  std::unordered_map<Device, std::vector<NativeEvent>> kept_;  // completed events, for reuse
};

}  // namespace strata
