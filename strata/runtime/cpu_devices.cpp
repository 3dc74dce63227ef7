#include "strata/runtime/cpu_devices.h"

#include <atomic>
#include <charconv>
#include <mutex>

#include "strata/core/error.h"
#include "strata/runtime/environment.h"

namespace strata {

namespace {

struct CpuDevices {
  std::mutex mutex;           // taken to read the environment, to set the count and to fix it
  std::atomic<int> count{0};  // 0 until read from the environment or set; every op reads it, without the lock
  bool fixed = false;         // a CPU allocation has been made
};

CpuDevices& cpu_devices() {
  static CpuDevices* const devices = new CpuDevices();  // used by allocators that live until exit
  return *devices;
}

}  // namespace

int parse_cpu_device_count(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  const bool whole = !text.empty() && ec == std::errc() && ptr == end;
  STRATA_CHECK(whole || ec == std::errc::result_out_of_range, InvalidArgumentError,
               "{}='{}' is not valid: expected a whole number of CPU devices from 1 to {}", kCpuDevicesVariable, text,
               kMaxCpuDevices);
  STRATA_CHECK(whole && value >= 1 && value <= kMaxCpuDevices, InvalidArgumentError,
               "{}='{}' is out of range: the number of CPU devices must be from 1 to {}", kCpuDevicesVariable, text,
               kMaxCpuDevices);
  return value;
}

int cpu_device_count() {
  CpuDevices& d = cpu_devices();
  if (const int n = d.count.load(std::memory_order_acquire); n != 0) return n;
  std::lock_guard lock(d.mutex);
  if (const int n = d.count.load(std::memory_order_relaxed); n != 0) return n;
  const auto env = environment_value(kCpuDevicesVariable);
  // Not kept when malformed: every use of a CPU device fails with the same message until it is fixed.
  const int n = env ? parse_cpu_device_count(*env) : 1;
  d.count.store(n, std::memory_order_release);
  return n;
}

void set_cpu_device_count(int count) {
  STRATA_CHECK(count >= 1 && count <= kMaxCpuDevices, InvalidArgumentError,
               "set_cpu_device_count: the number of CPU devices must be from 1 to {}, not {}", kMaxCpuDevices, count);
  CpuDevices& d = cpu_devices();
  std::lock_guard lock(d.mutex);
  const int current = d.count.load(std::memory_order_relaxed);
  STRATA_CHECK(!d.fixed || current == count, InvalidArgumentError,
               "set_cpu_device_count({}): there are already {} CPU device(s) with memory allocated on them; the count "
               "must be set before the first CPU allocation (or with {} before the program starts)",
               count, current, kCpuDevicesVariable);
  d.count.store(count, std::memory_order_release);
}

void detail::fix_cpu_device_count() {
  // Reads the count, if nothing has yet, and checks the other variables (Note [Strata's environment variables]).
  check_environment();
  CpuDevices& d = cpu_devices();
  std::lock_guard lock(d.mutex);
  d.fixed = true;
}

}  // namespace strata
