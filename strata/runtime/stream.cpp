#include "strata/runtime/stream.h"

#include <unordered_map>
#include <utility>

#include "strata/core/error.h"
#include "strata/runtime/kernel_assert.h"
#include "strata/runtime/plugin.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/transfer.h"

namespace strata {

namespace {

std::unordered_map<Device, Stream>& streams_of_this_thread() {
  thread_local std::unordered_map<Device, Stream> streams;
  return streams;
}
}  // namespace

Stream Stream::default_stream(Device device) {
  device = resolve(device);
  check_device(device);
  return Stream(device, nullptr, nullptr);
}

Stream Stream::create(Device device) {
  device = resolve(device);
  Backend& b = backend(device);
  const int index = backend_index(device);
  NativeStream native = b.create_stream(index);
  std::shared_ptr<void> owner(native, [&b, index](void* s) { b.destroy_stream(index, s); });
  return Stream(device, native, std::move(owner));
}

void Stream::synchronize() const {
  note_synchronization(device_, "Stream::synchronize");
  backend(device_).synchronize_stream(backend_index(device_), native_);
  check_stream_asserts(device_, native_);
}

bool Stream::query() const { return backend(device_).query_stream(backend_index(device_), native_); }

void Stream::wait(const Event& event) const {
  STRATA_CHECK(event.device() == device_, DeviceMismatchError,
               "Stream::wait: the stream is on {} but the event is on {}", device_, event.device());
  backend(device_).wait_event(backend_index(device_), native_, event.native());
}

// Lock-free: the streams are this thread's, and the backend lookup of resolve and default_stream reads an atomic
// (Note [Finding a backend without a lock]).
Stream current_stream(Device device) {
  device = resolve(device);
  auto& streams = streams_of_this_thread();
  // Most threads never set a stream; skipping the lookup then saves hashing the device.
  if (!streams.empty()) {
    if (auto it = streams.find(device); it != streams.end()) return it->second;
  }
  return Stream::default_stream(device);
}

NativeStream current_native_stream(Device device) {
  auto& streams = streams_of_this_thread();
  // Every op's allocation asks; most threads never set a stream, and hashing the device then costs more than the
  // allocation's bookkeeping.
  if (streams.empty()) return nullptr;
  if (auto it = streams.find(resolve(device)); it != streams.end()) return it->second.native();
  return nullptr;  // every default stream is the null stream (Stream::default_stream)
}

void set_current_stream(const Stream& stream) {
  auto& streams = streams_of_this_thread();
  streams.insert_or_assign(stream.device(), stream);
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() { set_current_stream(previous_); }

Event::Event(Device device) : device_(resolve(device)) {
  native_ = backend(device_).create_event(backend_index(device_));
}

Event::~Event() {
  if (native_ != nullptr) backend(device_).destroy_event(backend_index(device_), native_);
}

Event::Event(Event&& other) noexcept
    : device_(other.device_),
      native_(std::exchange(other.native_, nullptr)),
      recorded_on_(other.recorded_on_),
      recorded_(other.recorded_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (native_ != nullptr) backend(device_).destroy_event(backend_index(device_), native_);
    device_ = other.device_;
    native_ = std::exchange(other.native_, nullptr);
    recorded_on_ = other.recorded_on_;
    recorded_ = other.recorded_;
  }
  return *this;
}

void Event::record(const Stream& stream) {
  STRATA_CHECK(stream.device() == device_, DeviceMismatchError,
               "Event::record: the event is on {} but the stream is on {}", device_, stream.device());
  backend(device_).record_event(backend_index(device_), native_, stream.native());
  recorded_on_ = stream.native();
  recorded_ = true;
}

void Event::record() { record(current_stream(device_)); }

void Event::synchronize() const {
  note_synchronization(device_, "Event::synchronize");
  backend(device_).synchronize_event(backend_index(device_), native_);
  // The work before the event on its stream is done; an unrecorded event waited for nothing.
  if (recorded_) check_stream_asserts(device_, recorded_on_);
}

bool Event::query() const { return backend(device_).query_event(backend_index(device_), native_); }

float Event::elapsed_ms_since(const Event& start) const {
  STRATA_CHECK(recorded_ && start.recorded_, InvalidArgumentError,
               "Event::elapsed_ms_since: both events must be recorded before timing them");
  STRATA_CHECK(start.device_ == device_, DeviceMismatchError,
               "Event::elapsed_ms_since: the events are on different devices ({} and {})", start.device_, device_);
  return backend(device_).elapsed_ms(backend_index(device_), start.native_, native_);
}

void synchronize(Device device) {
  device = resolve(device);
  Backend& b = backend(device);
  note_synchronization(device, "synchronize");
  b.synchronize_device(backend_index(device));
  check_device_asserts(device);
}

}  // namespace strata
