#include "suite.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>

#include "strata/runtime/cuda.h"
#include "strata/runtime/parallel.h"

namespace strata::bench {

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> all = [] {
    std::vector<Workload> w = compute_workloads();
    for (Workload& s : system_workloads()) w.push_back(std::move(s));
    for (Workload& s : dist_workloads()) w.push_back(std::move(s));
    for (Workload& s : contention_workloads()) w.push_back(std::move(s));
    return w;
  }();
  return all;
}

double median_seconds(const std::function<void()>& fn, int repeats, int warmup) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> times;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  return n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
}

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

nlohmann::json env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? nlohmann::json(v) : nlohmann::json(nullptr);
}

const char* better_name(Better b) {
  switch (b) {
    case Better::Lower: return "lower";
    case Better::Higher: return "higher";
    case Better::Neither: break;
  }
  return "neither";
}

// 3 significant digits, without scientific notation for the values we print.
std::string format_value(double v) {
  const double a = std::abs(v);
  if (a >= 100 || v == 0) return fmt::format("{:.0f}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  if (a >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3g}", v);
}

}  // namespace

nlohmann::json machine_json() {
  const bool cuda = cuda::is_available();
  // Other processes on a machine with few cores make OpenMP's barriers wait for a time slice: say how busy it was.
  double load[1] = {-1};
  getloadavg(load, 1);
  return {{"cpu", cpu_model()},
          {"load_average_1min", load[0]},
          {"threads", num_threads()},
          {"cuda_available", cuda},
          {"cuda_devices", cuda ? cuda::device_count() : 0},
          {"cuda_unavailable_reason", cuda ? nlohmann::json(nullptr) : nlohmann::json(cuda::unavailable_reason())},
          {"OPENBLAS_CORETYPE", env_or_null("OPENBLAS_CORETYPE")},
          {"OPENBLAS_NUM_THREADS", env_or_null("OPENBLAS_NUM_THREADS")}};
}

nlohmann::json to_json(const std::vector<WorkloadResult>& results) {
  nlohmann::json out{{"tool", "strata-bench"}, {"machine", machine_json()}, {"workloads", nlohmann::json::object()}};
  for (const WorkloadResult& r : results) {
    nlohmann::json w{{"title", r.title}, {"skipped", r.skipped}, {"metrics", nlohmann::json::object()},
                     {"notes", r.notes}};
    if (r.skipped) w["skip_reason"] = r.skip_reason;
    for (const Metric& m : r.metrics) {
      w["metrics"][m.key] = {{"value", m.value}, {"unit", m.unit}, {"better", better_name(m.better)},
                             {"detail", m.detail}};
    }
    out["workloads"][r.name] = std::move(w);
  }
  return out;
}

std::string format_table(const std::vector<WorkloadResult>& results) {
  std::string out;
  const nlohmann::json machine = machine_json();
  out += fmt::format("strata-bench on {} ({} threads, load average {:.2f}); ", machine["cpu"].get<std::string>(),
                     machine["threads"].get<int>(), machine["load_average_1min"].get<double>());
  out += machine["cuda_available"].get<bool>()
             ? fmt::format("{} CUDA device(s)\n", machine["cuda_devices"].get<int>())
             : fmt::format("CUDA unavailable: {}\n", machine["cuda_unavailable_reason"].get<std::string>());
  for (const WorkloadResult& r : results) {
    out += fmt::format("\n== {} ({})\n", r.title, r.name);
    if (r.skipped) {
      out += fmt::format("   skipped: {}\n", r.skip_reason);
      continue;
    }
    for (const Metric& m : r.metrics) {
      out += fmt::format("   {:<34} {:>10} {:<9} {}\n", m.key, format_value(m.value), m.unit, m.detail);
    }
    for (const std::string& note : r.notes) out += fmt::format("   note: {}\n", note);
  }
  return out;
}

}  // namespace strata::bench
