// strata-smi: every device this process can see, like nvidia-smi, with Strata's own allocator figures.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "strata/core/error.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/memory_limit.h"
#include "strata/runtime/registry.h"

namespace {

using nlohmann::json;
using strata::Device;
using strata::DeviceType;

std::string version_string(int v) { return v == 0 ? "-" : fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

json allocator_json(Device device) {
  const strata::MemoryStats s = strata::memory_stats(device);
  json j = {{"allocated_bytes", s.allocated_bytes.current},
            {"reserved_bytes", s.reserved_bytes.current},
            {"peak_allocated_bytes", s.allocated_bytes.peak}};
  if (s.limit_bytes) j["limit_bytes"] = *s.limit_bytes;
  return j;
}

json device_json(Device device) {
  strata::Backend& backend = strata::backend(device);
  const int index = device.is_cpu() ? 0 : device.index();
  const strata::DeviceProperties p = backend.properties(index);
  const strata::MemoryInfo m = backend.memory_info(index);
  json j = {{"device", device.str()},
            {"name", p.name},
            {"memory_total_bytes", m.total},
            {"memory_used_bytes", m.total - m.free},
            {"allocator", allocator_json(device)}};
  if (device.is_cpu()) {
    j["cores"] = p.multiprocessor_count;
  } else {
    j["compute_capability"] = fmt::format("{}.{}", p.compute_capability_major, p.compute_capability_minor);
    j["multiprocessors"] = p.multiprocessor_count;
    j["driver_version"] = version_string(p.driver_version);
    j["runtime_version"] = version_string(p.runtime_version);
  }
  return j;
}

json report() {
  json j = {{"devices", json::array({device_json(strata::kCPU)})}};
  const int gpus = strata::cuda::device_count();
  for (int i = 0; i < gpus; ++i) j["devices"].push_back(device_json(Device(DeviceType::CUDA, i)));
  j["cuda_available"] = gpus > 0;
  if (gpus == 0) j["cuda_unavailable_reason"] = strata::cuda::unavailable_reason();
  return j;
}

void print_table(const json& j) {
  using strata::format_bytes;
  std::printf("%-7s %-44s %21s %30s\n", "Device", "Name", "Memory used / total", "Strata allocated / reserved");
  for (const auto& d : j["devices"]) {
    const auto& a = d["allocator"];
    std::printf("%-7s %-44.44s %10s / %-8s %14s / %-14s\n", d["device"].get<std::string>().c_str(),
                d["name"].get<std::string>().c_str(), format_bytes(d["memory_used_bytes"].get<std::size_t>()).c_str(),
                format_bytes(d["memory_total_bytes"].get<std::size_t>()).c_str(),
                format_bytes(a["allocated_bytes"].get<std::size_t>()).c_str(),
                format_bytes(a["reserved_bytes"].get<std::size_t>()).c_str());
    if (d.contains("cores")) {
      std::printf("        %d cores\n", d["cores"].get<int>());
    } else {
      std::printf("        compute capability %s, %d multiprocessors, driver %s, runtime %s\n",
                  d["compute_capability"].get<std::string>().c_str(), d["multiprocessors"].get<int>(),
                  d["driver_version"].get<std::string>().c_str(), d["runtime_version"].get<std::string>().c_str());
    }
  }
  if (!j["cuda_available"].get<bool>()) {
    std::printf("CUDA unavailable: %s\n", j["cuda_unavailable_reason"].get<std::string>().c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata-smi: the devices Strata can use, their memory and this process's allocator figures"};
  bool as_json = false;
  app.add_flag("--json", as_json, "print the report as JSON");
  CLI11_PARSE(app, argc, argv);
  try {
    const json j = report();
    if (as_json) {
      std::cout << j.dump(2) << "\n";
    } else {
      print_table(j);
    }
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "strata-smi: %s\n", e.what());
    return 1;
  }
  return 0;
}
