#pragma once

// What strata-smi reports about each device, and the two ways it prints it (a table for people, JSON for scripts).
// Header-only so that tests/tools/smi_test.cpp compiles the same code into strata_tests.

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/device.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/memory_limit.h"
#include "strata/runtime/plugin.h"
#include "strata/runtime/registry.h"

namespace strata::smi {

/// This process's caching-allocator figures for one device (from strata::memory_stats).
struct AllocatorFigures {
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  std::optional<int64_t> limit_bytes;
};

/// One device as strata-smi shows it. Memory figures are the device's own (all processes together).
struct DeviceReport {
  Device device;
  std::string name;
  std::size_t memory_total_bytes = 0;
  std::size_t memory_available_bytes = 0;  // CPU: MemAvailable; GPU: free device memory
  int cores = 0;                           // CPU: logical cores; GPU: multiprocessors
  int compute_capability_major = 0;        // GPU only, as the four fields below
  int compute_capability_minor = 0;
  std::string driver_version;  // as the vendor writes it (Backend::version_text): "13.0"
  std::string runtime_version;
  AllocatorFigures allocator;
};

/// The GPU device types strata-smi lists, in its order.
inline constexpr std::array<DeviceType, 2> kGpuTypes{DeviceType::CUDA, DeviceType::HIP};

/// Every device this process can use: the CPU devices first (one unless STRATA_CPU_DEVICES is set), then cuda:0,
/// cuda:1, ..., then hip:0, hip:1, ...
struct Report {
  std::vector<DeviceReport> devices;
  /// Per device type, why it has no usable device: one line; empty when it has one (and for the CPU).
  std::array<std::string, kDeviceTypeCount> unavailable;

  std::string& unavailable_reason(DeviceType type) { return unavailable[static_cast<std::size_t>(type)]; }
  const std::string& unavailable_reason(DeviceType type) const { return unavailable[static_cast<std::size_t>(type)]; }
};

/// Reads one device's properties, memory and allocator figures (creates the device's allocator, which applies
/// STRATA_MEMORY_LIMIT and throws InvalidArgumentError when it is malformed).
inline DeviceReport describe_device(Device device) {
  Backend& device_backend = backend(device);
  const int index = device.index();
  const DeviceProperties properties = device_backend.properties(index);
  const MemoryInfo memory = device_backend.memory_info(index);
  const MemoryStats stats = memory_stats(device);
  DeviceReport r;
  r.device = device;
  r.name = properties.name;
  r.memory_total_bytes = memory.total;
  r.memory_available_bytes = memory.free;
  r.cores = properties.multiprocessor_count;
  r.compute_capability_major = properties.compute_capability_major;
  r.compute_capability_minor = properties.compute_capability_minor;
  r.driver_version = device_backend.version_text(properties.driver_version);
  r.runtime_version = device_backend.version_text(properties.runtime_version);
  r.allocator = {stats.allocated_bytes.current, stats.reserved_bytes.current, stats.allocated_bytes.peak,
                 stats.limit_bytes};
  return r;
}

/// The report for this process, now.
inline Report collect_report() {
  Report report;
  const int cpus = device_count(DeviceType::CPU);
  for (int i = 0; i < cpus; ++i) report.devices.push_back(describe_device(Device(DeviceType::CPU, i)));
  for (const DeviceType type : kGpuTypes) {
    const int gpus = device_count(type);
    for (int i = 0; i < gpus; ++i) report.devices.push_back(describe_device(Device(type, i)));
    if (gpus == 0) report.unavailable_reason(type) = unavailable_reason(type);
  }
  return report;
}

/// The report as JSON; keys keep the order of the table. Byte counts are plain integers, versions strings.
inline nlohmann::ordered_json to_json(const Report& report) {
  using nlohmann::ordered_json;
  ordered_json devices = ordered_json::array();
  for (const DeviceReport& d : report.devices) {
    ordered_json j;
    j["device"] = d.device.str();
    j["type"] = device_type_name(d.device.type());
    j["index"] = d.device.index();
    j["name"] = d.name;
    j["memory_total_bytes"] = d.memory_total_bytes;
    j["memory_used_bytes"] = d.memory_total_bytes - d.memory_available_bytes;
    j["memory_available_bytes"] = d.memory_available_bytes;
    if (d.device.is_cpu()) {
      j["cores"] = d.cores;
    } else {
      j["compute_capability"] = fmt::format("{}.{}", d.compute_capability_major, d.compute_capability_minor);
      j["multiprocessors"] = d.cores;
      j["driver_version"] = d.driver_version;
      j["runtime_version"] = d.runtime_version;
    }
    ordered_json a = {{"allocated_bytes", d.allocator.allocated_bytes},
                      {"reserved_bytes", d.allocator.reserved_bytes},
                      {"peak_allocated_bytes", d.allocator.peak_allocated_bytes}};
    a["limit_bytes"] = d.allocator.limit_bytes ? ordered_json(*d.allocator.limit_bytes) : ordered_json(nullptr);
    j["allocator"] = std::move(a);
    devices.push_back(std::move(j));
  }
  ordered_json j;
  j["devices"] = std::move(devices);
  for (const DeviceType type : kGpuTypes) {
    const std::string& reason = report.unavailable_reason(type);
    const std::string_view name = device_type_name(type);
    j[fmt::format("{}_available", name)] = reason.empty();
    j[fmt::format("{}_unavailable_reason", name)] = reason.empty() ? ordered_json(nullptr) : ordered_json(reason);
  }
  return j;
}

/// The report as a table: one line per device with its memory and this process's allocator figures, a line of
/// details under it, and the reason CUDA or HIP is unavailable when it is.
inline std::string format_table(const Report& report) {
  const auto bytes = [](int64_t n) { return format_bytes(static_cast<std::size_t>(n < 0 ? 0 : n)); };
  std::string out = fmt::format("{:<7} {:<32} {:>23}   {}\n", "Device", "Name", "Memory used / total",
                                "Strata allocated / reserved / peak");
  for (const DeviceReport& d : report.devices) {
    const std::string memory = fmt::format("{} / {}", format_bytes(d.memory_total_bytes - d.memory_available_bytes),
                                           format_bytes(d.memory_total_bytes));
    out += fmt::format("{:<7} {:<32.32} {:>23}   {} / {} / {}\n", d.device.str(), d.name, memory,
                       bytes(d.allocator.allocated_bytes), bytes(d.allocator.reserved_bytes),
                       bytes(d.allocator.peak_allocated_bytes));
    if (d.device.is_cpu()) {
      out += fmt::format("        {} cores, {} available", d.cores, format_bytes(d.memory_available_bytes));
    } else {
      out += fmt::format("        compute capability {}.{}, {} multiprocessors, driver {}, runtime {}, {} free",
                         d.compute_capability_major, d.compute_capability_minor, d.cores, d.driver_version,
                         d.runtime_version, format_bytes(d.memory_available_bytes));
    }
    if (d.allocator.limit_bytes) out += fmt::format(", Strata limit {}", bytes(*d.allocator.limit_bytes));
    out += "\n";
  }
  for (const DeviceType type : kGpuTypes) {
    const std::string& reason = report.unavailable_reason(type);
    if (!reason.empty()) out += fmt::format("{} unavailable: {}\n", display_name(type), reason);
  }
  return out;
}

}  // namespace strata::smi
