// The profiler: see Note [The profiler] in profiler.h.
#include "strata/runtime/profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "strata/core/error.h"
#include "strata/ops/kernel_table.h"
#include "strata/runtime/environment.h"
#include "strata/runtime/plugin.h"
#include "strata/runtime/registry.h"

namespace strata::profiler {

namespace detail {
std::atomic<bool> recording{false};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace detail

namespace {

// Events recorded around an op on a device with events, read at stop().
struct PendingDeviceTime {
  std::size_t event;  // index in State::events
  Device device;
  void* start;
  void* stop;
};

struct State {
  std::mutex mutex;
  bool running = false;
  std::int64_t origin_ns = 0;
  std::vector<Event> events;
  std::vector<PendingDeviceTime> device_times;
};

// Never destroyed: STRATA_PROFILE's exit handler and threads still running at exit may reach it after other
// statics are gone.
State& state() {
  static State* s = new State;
  return *s;
}

std::uint64_t thread_number() {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t number = next.fetch_add(1);
  return number;
}

// Appends `e` (its start still absolute) while a recording runs; returns its index, or -1 when none runs.
std::int64_t append(Event e) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.running) return -1;
  e.start_ns -= s.origin_ns;
  e.thread = thread_number();
  s.events.push_back(std::move(e));
  return static_cast<std::int64_t>(s.events.size()) - 1;
}

std::string direction(Device dst, Device src) {
  if (src.is_cpu() && !dst.is_cpu()) return "H2D";
  if (!src.is_cpu() && dst.is_cpu()) return "D2H";
  return "D2D";
}

// PyTorch's way of writing a duration in its tables.
std::string format_time(std::int64_t ns) {
  const double us = static_cast<double>(ns) / 1e3;
  if (us >= 1e6) return fmt::format("{:.3f}s", us / 1e6);
  if (us >= 1e3) return fmt::format("{:.3f}ms", us / 1e3);
  return fmt::format("{:.3f}us", us);
}

std::string format_percent(std::int64_t part, std::int64_t whole) {
  return fmt::format("{:.2f}%", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
}

bool has_duration(const Event& e) {
  return e.kind == EventKind::Op || e.kind == EventKind::Range || e.kind == EventKind::Copy;
}

}  // namespace

void start() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  STRATA_CHECK(!s.running, InvalidArgumentError,
               "profiler::start: a recording is already running (recordings do not nest; stop() the running one)");
  s.events.clear();
  s.device_times.clear();
  s.origin_ns = detail::now_ns();
  s.running = true;
  detail::recording.store(true, std::memory_order_relaxed);
}

Result stop() {
  State& s = state();
  std::vector<Event> events;
  std::vector<PendingDeviceTime> device_times;
  {
    std::lock_guard lock(s.mutex);
    STRATA_CHECK(s.running, InvalidArgumentError, "profiler::stop: no recording is running (call start() first)");
    detail::recording.store(false, std::memory_order_relaxed);
    s.running = false;
    events = std::move(s.events);
    device_times = std::move(s.device_times);
    s.events.clear();
    s.device_times.clear();
  }
  // Device times: each op's stop event is waited for, then timed against its start event.
  for (const PendingDeviceTime& p : device_times) {
    Backend& b = backend(p.device);
    const int index = backend_index(p.device);
    try {
      b.synchronize_event(index, p.stop);
      events[p.event].device_ns = static_cast<std::int64_t>(b.elapsed_ms(index, p.start, p.stop) * 1e6);
    } catch (const Error&) {
      // A backend that cannot time its events leaves the op without a device time (-1), as on the CPU.
    }
    b.destroy_event(index, p.start);
    b.destroy_event(index, p.stop);
  }
  return Result(std::move(events));
}

bool is_enabled() { return detail::on(); }

Profile::~Profile() {
  if (!stopped_) {
    try {
      (void)stop();
    } catch (const Error&) {
      // Someone else stopped the recording already; there is nothing left to end.
    }
  }
}

const Result& Profile::stop() {
  if (!stopped_) {
    stopped_ = true;
    result_ = profiler::stop();
  }
  return result_;
}

RecordFunction::RecordFunction(std::string name) : name_(std::move(name)) {
  if (detail::on()) start_ns_ = detail::now_ns();
}

RecordFunction::~RecordFunction() {
  if (start_ns_ < 0 || !detail::on()) return;
  Event e;
  e.kind = EventKind::Range;
  e.name = std::move(name_);
  e.start_ns = start_ns_;
  e.duration_ns = detail::now_ns() - start_ns_;
  try {
    append(std::move(e));
  } catch (...) {
    // Out of memory while recording: the range is lost, the program goes on.
  }
}

void record_allocator_event(const char* what, Device device, std::int64_t bytes, const char* detail_text) {
  if (!detail::on()) return;
  Event e;
  e.kind = EventKind::Allocator;
  e.name = what;
  e.device = device;
  e.start_ns = detail::now_ns();
  e.bytes = bytes;
  e.detail = detail_text != nullptr ? detail_text : "";
  append(std::move(e));
}

void record_copy(Device dst, Device src, std::int64_t bytes, std::int64_t start_ns) {
  if (!detail::on()) return;
  Event e;
  e.kind = EventKind::Copy;
  e.name = "copy " + direction(dst, src);
  e.device = dst.is_cpu() ? src : dst;
  e.start_ns = start_ns;
  e.duration_ns = detail::now_ns() - start_ns;
  e.bytes = bytes;
  e.detail = fmt::format("{} -> {}", src, dst);
  append(std::move(e));
}

void record_synchronization(Device device, const char* what) {
  if (!detail::on()) return;
  Event e;
  e.kind = EventKind::Synchronization;
  e.name = what != nullptr ? what : "synchronize";
  e.device = device;
  e.start_ns = detail::now_ns();
  append(std::move(e));
}

namespace detail {

OpTimer::OpTimer(const ops::OpCall& call) : call_(call), start_ns_(now_ns()) {
  if (call.device.is_cpu()) return;
  // Note [The profiler]: on a device with events the op is bracketed by two, read when the recording stops.
  const Device device = resolve(call.device);
  Backend& b = backend(device);
  const int index = backend_index(device);
  try {
    start_event_ = b.create_event(index);
    stop_event_ = b.create_event(index);
    b.record_event(index, start_event_, call.stream);
  } catch (const Error&) {
    if (start_event_ != nullptr) b.destroy_event(index, start_event_);
    if (stop_event_ != nullptr) b.destroy_event(index, stop_event_);
    start_event_ = stop_event_ = nullptr;  // no events on this backend: host time only
  }
}

void OpTimer::operand(const TensorView& view) { shapes_.emplace_back(view.shape.begin(), view.shape.end()); }

OpTimer::~OpTimer() {
  Event e;
  e.kind = EventKind::Op;
  e.name = call_.op;
  e.device = call_.device;
  e.stream = reinterpret_cast<std::uintptr_t>(call_.stream);
  e.start_ns = start_ns_;
  e.duration_ns = now_ns() - start_ns_;
  e.shapes = std::move(shapes_);
  Device device = call_.device;
  try {
    if (start_event_ != nullptr) {
      device = resolve(device);
      backend(device).record_event(backend_index(device), stop_event_, call_.stream);
    }
    const std::int64_t index = append(std::move(e));
    if (start_event_ != nullptr) {
      State& s = state();
      std::lock_guard lock(s.mutex);
      if (index >= 0 && s.running) {
        s.device_times.push_back({static_cast<std::size_t>(index), device, start_event_, stop_event_});
        return;
      }
    }
  } catch (...) {
    // A failure to record must not turn into one of the op's: the event is dropped.
  }
  if (start_event_ != nullptr) {
    backend(device).destroy_event(backend_index(device), start_event_);
    backend(device).destroy_event(backend_index(device), stop_event_);
  }
}

}  // namespace detail

// --- results ---

std::vector<OpAverage> Result::key_averages() const {
  // Self time: per thread, an event's time less that of the events nested directly inside it.
  std::vector<std::int64_t> self(events_.size(), 0);
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> by_thread;
  for (std::size_t i = 0; i < events_.size(); ++i) {
    if (!has_duration(events_[i])) continue;
    self[i] = events_[i].duration_ns;
    by_thread[events_[i].thread].push_back(i);
  }
  for (auto& [thread, indices] : by_thread) {
    std::sort(indices.begin(), indices.end(), [&](std::size_t a, std::size_t b) {
      if (events_[a].start_ns != events_[b].start_ns) return events_[a].start_ns < events_[b].start_ns;
      return events_[a].duration_ns > events_[b].duration_ns;
    });
    std::vector<std::size_t> open;
    for (std::size_t i : indices) {
      const Event& e = events_[i];
      while (!open.empty() && events_[open.back()].start_ns + events_[open.back()].duration_ns <= e.start_ns) {
        open.pop_back();
      }
      if (!open.empty()) self[open.back()] -= e.duration_ns;
      open.push_back(i);
    }
  }
  std::vector<OpAverage> averages;
  std::unordered_map<std::string, std::size_t> index;
  std::vector<std::size_t> order(events_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return events_[a].start_ns < events_[b].start_ns; });
  for (std::size_t i : order) {
    const Event& e = events_[i];
    if (!has_duration(e)) continue;
    auto [it, added] = index.try_emplace(e.name, averages.size());
    if (added) {
      OpAverage first;
      first.name = e.name;
      averages.push_back(std::move(first));
    }
    OpAverage& a = averages[it->second];
    ++a.calls;
    a.cpu_total_ns += e.duration_ns;
    a.self_cpu_ns += std::max<std::int64_t>(0, self[i]);
    if (e.device_ns >= 0) {
      a.device_total_ns += e.device_ns;
      ++a.device_calls;
    }
  }
  return averages;
}

std::string Result::table(std::string_view sort_by, int row_limit) const {
  std::vector<OpAverage> rows = key_averages();
  using Key = std::int64_t (*)(const OpAverage&);
  static const std::pair<std::string_view, Key> keys[] = {
      {"cpu_time_total", [](const OpAverage& a) { return a.cpu_total_ns; }},
      {"self_cpu_time_total", [](const OpAverage& a) { return a.self_cpu_ns; }},
      {"cpu_time", [](const OpAverage& a) { return a.calls > 0 ? a.cpu_total_ns / a.calls : 0; }},
      {"count", [](const OpAverage& a) { return a.calls; }},
      {"calls", [](const OpAverage& a) { return a.calls; }},
      {"device_time_total", [](const OpAverage& a) { return a.device_total_ns; }},
      {"cuda_time_total", [](const OpAverage& a) { return a.device_total_ns; }},
      {"device_time", [](const OpAverage& a) { return a.device_calls > 0 ? a.device_total_ns / a.device_calls : 0; }},
  };
  Key key = nullptr;
  for (const auto& [name, fn] : keys) {
    if (name == sort_by) key = fn;
  }
  STRATA_CHECK(key != nullptr, InvalidArgumentError,
               "profiler table: sort_by='{}' is not a key; expected one of cpu_time_total, self_cpu_time_total, "
               "cpu_time, count, calls, device_time_total, cuda_time_total, device_time",
               sort_by);
  std::stable_sort(rows.begin(), rows.end(), [&](const OpAverage& a, const OpAverage& b) { return key(a) > key(b); });
  std::int64_t self_total = 0;
  bool device_times = false;
  for (const OpAverage& a : rows) {
    self_total += a.self_cpu_ns;
    device_times = device_times || a.device_calls > 0;
  }
  if (row_limit >= 0 && rows.size() > static_cast<std::size_t>(row_limit)) rows.resize(row_limit);

  std::vector<std::string> header = {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"};
  if (device_times) header.insert(header.end(), {"Device total", "Device time avg"});
  header.push_back("# of Calls");
  std::vector<std::vector<std::string>> cells;
  for (const OpAverage& a : rows) {
    std::vector<std::string> row = {a.name,
                                    format_percent(a.self_cpu_ns, self_total),
                                    format_time(a.self_cpu_ns),
                                    format_percent(a.cpu_total_ns, self_total),
                                    format_time(a.cpu_total_ns),
                                    format_time(a.calls > 0 ? a.cpu_total_ns / a.calls : 0)};
    if (device_times) {
      row.push_back(format_time(a.device_total_ns));
      row.push_back(format_time(a.device_calls > 0 ? a.device_total_ns / a.device_calls : 0));
    }
    row.push_back(std::to_string(a.calls));
    cells.push_back(std::move(row));
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  std::string rule;
  for (std::size_t c = 0; c < header.size(); ++c)
    rule += std::string(width[c], '-') + (c + 1 < header.size() ? "  " : "");
  const auto line = [&](const std::vector<std::string>& row) {
    std::string out;
    for (std::size_t c = 0; c < row.size(); ++c) {
      out += c == 0 ? fmt::format("{:<{}}", row[c], width[c]) : fmt::format("{:>{}}", row[c], width[c]);
      if (c + 1 < row.size()) out += "  ";
    }
    return out + "\n";
  };
  std::string out = rule + "\n" + line(header) + rule + "\n";
  for (const auto& row : cells) out += line(row);
  out += rule + "\n";
  out += "Self CPU time total: " + format_time(self_total) + "\n";
  return out;
}

// Written one event at a time, so that a long recording never holds the whole document as JSON objects.
void Result::write_chrome_trace(std::ostream& out) const {
  using nlohmann::json;
  constexpr int kPid = 0;
  bool first = true;
  const auto put = [&](const json& j) {
    out << (first ? "\n" : ",\n") << j.dump();
    first = false;
  };
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  put({{"name", "process_name"}, {"ph", "M"}, {"pid", kPid}, {"args", {{"name", "strata"}}}});
  std::vector<std::uint64_t> threads;
  for (const Event& e : events_) {
    if (std::find(threads.begin(), threads.end(), e.thread) == threads.end()) threads.push_back(e.thread);
  }
  std::sort(threads.begin(), threads.end());
  for (std::uint64_t t : threads) {
    put({{"name", "thread_name"},
         {"ph", "M"},
         {"pid", kPid},
         {"tid", t},
         {"args", {{"name", fmt::format("strata thread {}", t)}}}});
  }
  const auto us = [](std::int64_t ns) { return static_cast<double>(ns) / 1e3; };
  for (const Event& e : events_) {
    json j = {{"name", e.name}, {"pid", kPid}, {"tid", e.thread}, {"ts", us(e.start_ns)}};
    json args = {{"device", e.device.str()}};
    switch (e.kind) {
      case EventKind::Op:
        j["cat"] = "op";
        args["stream"] = fmt::format("{:#x}", e.stream);
        args["shapes"] = e.shapes;
        if (e.device_ns >= 0) args["device_time_us"] = us(e.device_ns);
        break;
      case EventKind::Range: j["cat"] = "range"; break;
      case EventKind::Copy:
        j["cat"] = "copy";
        args["bytes"] = e.bytes;
        args["direction"] = e.name.substr(5);
        args["route"] = e.detail;
        break;
      case EventKind::Synchronization:
        j["cat"] = "sync";
        args["cause"] = e.name;
        break;
      case EventKind::Allocator:
        j["cat"] = "allocator";
        args["bytes"] = e.bytes;
        if (!e.detail.empty()) args["detail"] = e.detail;
        break;
    }
    if (has_duration(e)) {
      j["ph"] = "X";
      j["dur"] = us(e.duration_ns);
    } else {
      j["ph"] = "i";
      j["s"] = "t";
    }
    j["args"] = std::move(args);
    put(j);
  }
  out << "\n]}\n";
}

std::string Result::chrome_trace() const {
  std::ostringstream out;
  write_chrome_trace(out);
  return out.str();
}

void Result::export_chrome_trace(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  STRATA_CHECK(out.good(), IOError, "cannot write the profiler trace to '{}': {}", path, std::strerror(errno));
  write_chrome_trace(out);
  out.close();
  STRATA_CHECK(!out.fail(), IOError, "cannot write the profiler trace to '{}': writing failed", path);
}

void check_writable(const std::string& path) {
  STRATA_CHECK(!path.empty(), IOError, "cannot write the profiler trace to '': the path is empty");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  STRATA_CHECK(out.good(), IOError, "cannot write the profiler trace to '{}': {}", path, std::strerror(errno));
}

// --- STRATA_PROFILE ---

// Note [STRATA_PROFILE]
// STRATA_PROFILE=FILE profiles a whole program that links libstrata: a static initialiser checks that FILE can be
// written (refusing to start otherwise, with a message naming the path: a run must not fail at its end) and starts
// a recording; an exit handler stops it, writes the trace to FILE and prints the table of the top ops to stderr.
// The handler is registered after the profiler's state exists, whose storage is never freed, so it runs before
// nothing it needs is destroyed. A program that stops the recording itself (profiler::stop) takes it over: the
// handler then writes nothing.
namespace {
std::string& profile_path() {
  static std::string* path = new std::string;
  return *path;
}

void write_profile_at_exit() {
  if (!is_enabled()) return;
  try {
    const Result result = stop();
    result.export_chrome_trace(profile_path());
    std::fprintf(stderr, "strata: STRATA_PROFILE: wrote %zu events to %s\n%s", result.events().size(),
                 profile_path().c_str(), result.table("cpu_time_total", 10).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata: STRATA_PROFILE: %s\n", e.what());
  }
}

[[maybe_unused]] const bool profile_from_environment = [] {
  std::optional<std::string> path;
  try {
    path = environment_value("STRATA_PROFILE");
    if (!path) return false;
    check_writable(*path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata: STRATA_PROFILE='%s' is refused: %s\n", path ? path->c_str() : "", e.what());
    std::_Exit(2);
  }
  profile_path() = *path;
  (void)state();
  std::atexit(write_profile_at_exit);
  start();
  return true;
}();
}  // namespace

}  // namespace strata::profiler
