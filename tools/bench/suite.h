#pragma once

// The workloads of strata-bench and how their results are reported. Each workload measures a few
// metrics under stable keys; bench/compare-libtorch and bench/compare-pytorch measure the same keys with the
// incumbents and divide.

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/core/device.h"

namespace strata::train {
struct EpochReport;
}

namespace strata::bench {

/// Whether a bigger or a smaller value of a metric is better (time: lower; throughput: higher).
enum class Better { Lower, Higher, Neither };

struct Metric {
  std::string key;  // stable, e.g. "matmul_cpu_n256"; the comparison scripts match on it
  double value = 0;
  std::string unit;  // "GFLOP/s", "ms", "ns/op", ...
  Better better = Better::Neither;
  std::string detail;  // what exactly was measured, in a few words
};

struct WorkloadResult {
  std::string name;  // "matmul", "d2l", ...
  std::string title;
  std::vector<Metric> metrics;
  std::vector<std::string> notes;  // what the numbers mean, what was not measured here and why
  bool skipped = false;
  std::string skip_reason;
};

struct RunOptions {
  bool quick = false;   // fewer sizes, fewer repetitions, a subset of the data
  std::string data_dir;  // Fashion-MNIST IDX files
  std::string self_dir;  // folder of the strata-bench executable (for its helper programs)
};

struct Workload {
  std::string name;
  std::string title;
  std::function<WorkloadResult(const RunOptions&)> run;
};

/// Every workload, in the order.
const std::vector<Workload>& workloads();

/// The workloads of each group (defined in workloads_*.cpp).
std::vector<Workload> compute_workloads();
std::vector<Workload> system_workloads();
std::vector<Workload> dist_workloads();
std::vector<Workload> contention_workloads();

/// The D2L exercise once after a warm-up: `products` products of 100x100 matrices on `device`, each product's norm
/// read at once (read_each) or kept on the device and read at the end; its seconds and synchronisations.
struct D2lRun {
  double seconds;
  int64_t syncs;
};
D2lRun d2l_run(Device device, bool read_each, int products);

/// One timed epoch of the reference network (strata-train's reference recipe) over the first `images` training
/// images in `data_dir`, on `device`, after a warm-up of 10 steps.
train::EpochReport timed_epoch(const std::string& data_dir, Device device, int64_t images);

/// The machine's peak f32 arithmetic rate on all of Strata's CPU threads (Note [The machine's peak FMA rate]).
struct PeakRate {
  double flops_per_second = 0;
  std::string how;  // what was timed, in a few words
};
PeakRate cpu_peak_rate(bool quick);

/// Median of `repeats` timed calls of fn after `warmup` untimed ones, in seconds.
double median_seconds(const std::function<void()>& fn, int repeats, int warmup = 1);

/// The machine: CPU model and cores, CUDA availability (or why not), OPENBLAS_* variables, threads.
nlohmann::json machine_json();
nlohmann::json to_json(const std::vector<WorkloadResult>& results);
std::string format_table(const std::vector<WorkloadResult>& results);

}  // namespace strata::bench
