// Blocks used on other streams: see Note [Memory used on other streams] in allocator.h.
#include "strata/runtime/stream_uses.h"

#include <memory>
#include <utility>

#include "strata/core/error.h"
#include "strata/runtime/plugin.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/transfer.h"

namespace strata {

namespace {

class BackendStreamEvents final : public StreamEvents {
 public:
  NativeEvent create(Device device) override { return backend(device).create_event(backend_index(device)); }
  void destroy(Device device, NativeEvent event) noexcept override {
    try {
      if (Backend* b = find_backend(device.type())) b->destroy_event(backend_index(device), event);
    } catch (const Error&) {
      // Only a backend that could not be loaded throws here, and then it made no events.
    }
  }
  void record(Device device, NativeEvent event, NativeStream stream) override {
    backend(device).record_event(backend_index(device), event, stream);
  }
  bool query(Device device, NativeEvent event) override {
    return backend(device).query_event(backend_index(device), event);
  }
  void synchronize(Device device, NativeEvent event) override {
    note_synchronization(device, "allocate (waiting for other streams to finish with freed memory)");
    backend(device).synchronize_event(backend_index(device), event);
  }
};

}  // namespace

StreamEvents& backend_stream_events() {
  // Never destroyed, as the allocators that use it (Note [Device allocators live until the process ends]).
  static BackendStreamEvents* const events = std::make_unique<BackendStreamEvents>().release();
  return *events;
}

PendingFrees::~PendingFrees() {
  for (const Pending& p : pending_) {
    for (const StreamUse& use : p.uses) destroy_event(use.device, use.event);
  }
  for (const auto& [device, events] : kept_) {
    for (NativeEvent event : events) destroy_event(device, event);
  }
}

NativeEvent PendingFrees::take_event(Device device) {
  if (auto it = kept_.find(device); it != kept_.end() && !it->second.empty()) {
    NativeEvent event = it->second.back();
    it->second.pop_back();
    return event;
  }
  return events_.create(device);
}

void PendingFrees::add(void* block, std::vector<StreamUse> uses) {
  try {
    for (const StreamUse& use : uses) events_.record(use.device, use.event, use.stream);
    pending_.push_back({block, std::move(uses)});
  } catch (...) {
    for (const StreamUse& use : uses) destroy_event(use.device, use.event);
    throw;
  }
}

std::vector<void*> PendingFrees::take_completed() {
  std::vector<void*> completed;
  for (std::size_t i = 0; i < pending_.size();) {
    std::vector<StreamUse>& uses = pending_[i].uses;
    for (std::size_t j = 0; j < uses.size();) {
      if (!events_.query(uses[j].device, uses[j].event)) {
        ++j;
        continue;
      }
      const StreamUse done = uses[j];
      uses[j] = uses.back();
      uses.pop_back();
      keep(done.device, done.event);
    }
    if (!uses.empty()) {
      ++i;
      continue;
    }
    completed.push_back(pending_[i].block);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return completed;
}

std::vector<void*> PendingFrees::wait_all() {
  for (const Pending& p : pending_) {
    for (const StreamUse& use : p.uses) events_.synchronize(use.device, use.event);
  }
  return take_completed();
}

void PendingFrees::destroy_event(Device device, NativeEvent event) noexcept { events_.destroy(device, event); }

void PendingFrees::keep(Device device, NativeEvent event) {
  try {
    kept_[device].push_back(event);
  } catch (...) {
    destroy_event(device, event);
  }
}

}  // namespace strata
