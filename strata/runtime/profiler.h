#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/core/device.h"

namespace strata {
struct TensorView;
namespace ops {
struct OpCall;
}
}  // namespace strata

namespace strata::profiler {

// Note [The profiler]
// strata::profiler records what a run spends its time on, as torch.profiler does: every kernel call (the op's
// name, device, stream, operand shapes, host start and duration and, on a device with events, the device time
// between two events recorded around it), every copy between devices (bytes and direction: the sites that feed
// transfer_counters()), every synchronisation with its cause (note_synchronization) and the caching allocator's
// segment allocations, segment frees, cache flushes and out-of-memory errors. The hook for ops sits in the op
// table's dispatch (ops::KernelSlot::get returns a callable that checks one flag), so every op reaches it with its
// name and device and no front end needs a line of its own.
// Off (the default), each hook costs one relaxed load of an atomic bool; `strata-bench --only overhead` measures
// it (docs/benchmarks.md, Profiler overhead). On, events go to one mutex-guarded list: recording is for looking at
// a run, not for timing the last nanosecond, and a per-thread buffer would have to outlive its thread.
// A recording is exported as a Chrome trace (the Trace Event Format that Perfetto and chrome://tracing open) and
// summarised as a table of ops by total time, in the shape of PyTorch's key_averages().table().

/// What an event records.
enum class EventKind { Op, Range, Copy, Synchronization, Allocator };

/// One recorded event. Times are nanoseconds on the steady clock, from the start of the recording.
struct Event {
  EventKind kind = EventKind::Op;
  std::string name;  // the op, the range, "copy H2D"/"D2H"/"D2D", the synchronisation's cause, the allocator event
  Device device = kCPU;
  std::uintptr_t stream = 0;  // the backend's stream handle; 0 on the CPU and for a device's default stream
  std::uint64_t thread = 0;   // a small number per recording thread, 1 first
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;                   // 0 for instant events (synchronisations, allocator events)
  std::vector<std::vector<std::int64_t>> shapes;  // ops: every tensor operand's shape, outputs first
  std::int64_t bytes = 0;                         // copies and allocator events
  std::string detail;                             // copies: "cpu -> cuda:0"; allocator: the pool or cause
  std::int64_t device_ns = -1;                    // ops on a device with events: its time between them; else -1
};

/// Per-name totals over a recording, as in PyTorch's key_averages().
struct OpAverage {
  std::string name;
  std::int64_t calls = 0;
  std::int64_t cpu_total_ns = 0;  // host time including nested events
  std::int64_t self_cpu_ns = 0;   // host time less the events nested inside on the same thread
  std::int64_t device_total_ns = 0;
  std::int64_t device_calls = 0;  // calls with a device time
};

class Result {
 public:
  Result() = default;
  explicit Result(std::vector<Event> events) : events_(std::move(events)) {}
  const std::vector<Event>& events() const { return events_; }
  /// Ops and ranges summed per name, in first-seen order.
  std::vector<OpAverage> key_averages() const;
  /// The top `row_limit` names (all when negative) by `sort_by`: cpu_time_total, self_cpu_time_total, cpu_time
  /// (the average), count (or calls), device_time_total (or cuda_time_total), device_time; anything else is an
  /// InvalidArgumentError naming the accepted keys.
  std::string table(std::string_view sort_by = "cpu_time_total", int row_limit = 10) const;
  /// The trace as Chrome's Trace Event Format (JSON text).
  std::string chrome_trace() const;
  /// Writes chrome_trace() to `path`; IOError naming the path when it cannot be written.
  void export_chrome_trace(const std::string& path) const;
  void write_chrome_trace(std::ostream& out) const;

 private:
  std::vector<Event> events_;
};

/// Starts a recording. InvalidArgumentError when one is already running (recordings do not nest).
void start();
/// Ends the recording and returns what it holds; InvalidArgumentError when none is running. On devices with events it
/// waits for the events recorded around ops, to read their device times.
Result stop();
/// Whether a recording is running.
bool is_enabled();

/// A recording for its lifetime (stopped, and the result dropped, if stop() was not called).
class Profile {
 public:
  Profile() { start(); }
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;
  /// Ends the recording (once; a second call returns the same result).
  const Result& stop();

 private:
  bool stopped_ = false;
  Result result_;
};

/// A named range on the timeline (torch.profiler.record_function): an event from construction to destruction that
/// holds the ops called inside it. Costs one relaxed load when no recording is running.
class RecordFunction {
 public:
  explicit RecordFunction(std::string name);
  ~RecordFunction();
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

 private:
  std::string name_;
  std::int64_t start_ns_ = -1;
};

/// Checks that `path` can be written (creating it, empty, as a trace file would be), so that a run is refused
/// before it starts rather than after; IOError naming the path otherwise.
void check_writable(const std::string& path);

/// The allocator's events (Note [The profiler]); `what` is "segment_alloc", "segment_free", "cache_flush" or
/// "out_of_memory".
void record_allocator_event(const char* what, Device device, std::int64_t bytes, const char* detail);
/// A copy between two devices: `start_ns` from detail::now_ns() before it began.
void record_copy(Device dst, Device src, std::int64_t bytes, std::int64_t start_ns);
/// A synchronisation with `device`, caused by `what`.
void record_synchronization(Device device, const char* what);

namespace detail {
/// Whether a recording is running: the one load every hook makes.
extern std::atomic<bool> recording;
inline bool on() { return recording.load(std::memory_order_relaxed); }
/// Nanoseconds on the steady clock.
std::int64_t now_ns();

/// Times one kernel call while a recording runs (ops::KernelSlot's dispatch makes one; see the note).
class OpTimer {
 public:
  explicit OpTimer(const ops::OpCall& call);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;
  void operand(const TensorView& view);
  template <typename T>
  void operand(const T&) {}

 private:
  const ops::OpCall& call_;
  std::int64_t start_ns_;
  std::vector<std::vector<std::int64_t>> shapes_;
  void* start_event_ = nullptr;  // NativeEvents on a device with events
  void* stop_event_ = nullptr;
};
}  // namespace detail

}  // namespace strata::profiler
