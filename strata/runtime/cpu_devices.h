#pragma once

#include <string_view>

namespace strata {

/// The environment variable that sets how many CPU devices there are: `STRATA_CPU_DEVICES=2` gives cpu:0 and cpu:1.
inline constexpr const char* kCpuDevicesVariable = "STRATA_CPU_DEVICES";
/// The most virtual CPU devices one process may have.
inline constexpr int kMaxCpuDevices = 64;

// Note [Virtual CPU devices]
// As JAX's forced host device count, STRATA_CPU_DEVICES=N (or set_cpu_device_count(N) before first use) makes
// cpu:0 ... cpu:N-1 distinct devices, so that code written for several devices runs, and is tested, on any machine.
// The default is 1, where "cpu" and "cpu:0" name the one CPU device. Each device has what a GPU has: its own caching
// allocator, statistics and limit (STRATA_MEMORY_LIMIT=cpu:1=1GiB), its own line in strata-smi; an op mixing two of
// them is a DeviceMismatchError, and a copy between them is a counted device-to-device copy. They share the host's
// memory and cores: each reports the whole of both, and the cores are shared fairly between the threads that drive
// them (Note [Sharing the cores between devices] in parallel.cpp).
//  * N is a whole number from 1 to kMaxCpuDevices; anything else is an InvalidArgumentError naming the variable.
//    The cap is for typos (a count beyond it is no test of anything the first 64 would not show).
//  * The count is read on first use of a CPU device and fixed by the first CPU allocation: memory, tensors and
//    statistics already belong to devices, so changing the count then is refused.

/// Parses a value of STRATA_CPU_DEVICES; pure, so tests call it directly.
int parse_cpu_device_count(std::string_view text);

/// The number of CPU devices (1 unless virtual devices are on). Throws InvalidArgumentError when
/// STRATA_CPU_DEVICES is malformed.
int cpu_device_count();

/// Sets the number of CPU devices, overriding STRATA_CPU_DEVICES. Refused (InvalidArgumentError, with the reason)
/// for a count outside 1..kMaxCpuDevices, and for a change after the first CPU allocation.
void set_cpu_device_count(int count);

namespace detail {
/// Called on the first allocation on a CPU device: from then on the count is fixed.
void fix_cpu_device_count();
}  // namespace detail

}  // namespace strata
