#pragma once

#include <memory>

#include "strata/core/device.h"
#include "strata/runtime/backend.h"

namespace strata {

class Event;

/// A queue of work on one device. Work on one stream runs in order. Streams are cheap values: copies share the
/// underlying native stream, which is destroyed with the last copy of a stream made by `Stream::create`.
class Stream {
 public:
  /// The default stream of a device.
  static Stream default_stream(Device device);
  /// A new stream on `device` (throws DeviceUnavailableError when the device is absent).
  static Stream create(Device device);

  Device device() const { return device_; }
  NativeStream native() const { return native_; }
  bool is_default() const { return native_ == nullptr; }

  /// Blocks the host until all work queued so far has finished (counted as a synchronisation), then reports a
  /// device-side assert recorded on this stream (not on others: their work may still run).
  void synchronize() const;
  /// True when all queued work has finished.
  bool query() const;
  /// Makes later work on this stream wait for `event`, without blocking the host.
  void wait(const Event& event) const;

  friend bool operator==(const Stream& a, const Stream& b) { return a.device_ == b.device_ && a.native_ == b.native_; }

 private:
  Stream(Device device, NativeStream native, std::shared_ptr<void> owner)
      : device_(device), native_(native), owner_(std::move(owner)) {}
  Device device_;
  NativeStream native_;
  std::shared_ptr<void> owner_;
};

/// The stream new work on `device` goes to on this thread (the default stream unless a StreamGuard is active).
Stream current_stream(Device device);
/// The native handle of current_stream(device), without building a Stream or checking the device (every op and every
/// allocation asks).
NativeStream current_native_stream(Device device);
void set_current_stream(const Stream& stream);

/// Makes `stream` current for its device until the guard goes out of scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

/// A marker in a stream: record it, wait on it from another stream, or time the work between two events.
class Event {
 public:
  explicit Event(Device device);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  Device device() const { return device_; }
  NativeEvent native() const { return native_; }
  void record(const Stream& stream);
  /// Records on the device's current stream.
  void record();
  /// Waits for the recorded work, then reports a device-side assert recorded on the stream it was recorded on.
  void synchronize() const;
  bool query() const;
  /// Milliseconds from `start` to this event; both must have been recorded and completed.
  float elapsed_ms_since(const Event& start) const;

 private:
  Device device_;
  NativeEvent native_ = nullptr;
  NativeStream recorded_on_ = nullptr;  // the stream of the last record(), whose asserts synchronize() checks
  bool recorded_ = false;
};

/// Waits for all work on a device (counted as a synchronisation) and reports a device-side assert of any stream.
void synchronize(Device device);

}  // namespace strata
