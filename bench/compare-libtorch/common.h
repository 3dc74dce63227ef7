// What the comparison programs (torch_bench.cpp, blas_bench.cpp) share: how they time a call, as strata-bench
// times Strata's (one warm-up call, then batches of calls lasting ~20 ms each, the median per call), and the
// environment they report. Header-only: each program is one compiler run of the run script.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

namespace compare {

using Clock = std::chrono::steady_clock;

/// The median of `repeats` timed calls of fn, after `warmup` untimed ones, in seconds.
inline double median_seconds(const std::function<void()>& fn, int repeats, int warmup = 1) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    const auto s = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - s).count());
  }
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  return n % 2 == 1 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/// Seconds per call of fn, timed in batches of about `batch_s` seconds.
inline double seconds_per_call(const std::function<void()>& fn, int repeats, double batch_s = 0.02) {
  fn();
  const double once = median_seconds(fn, 1, 0);
  const int batch = once < batch_s ? static_cast<int>(std::min(1e6, batch_s / std::max(once, 1e-9))) : 1;
  const auto batched = [&] {
    for (int i = 0; i < batch; ++i) fn();
  };
  return median_seconds(batched, repeats, 0) / batch;
}

/// The variables that decide how the libraries run (bench/compare-libtorch/run sets them), as this process saw them.
inline nlohmann::json environment() {
  nlohmann::json env = nlohmann::json::object();
  for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "MALLOC_MMAP_THRESHOLD_",
                           "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"}) {
    const char* value = std::getenv(name);
    env[name] = value != nullptr ? nlohmann::json(value) : nlohmann::json(nullptr);
  }
  return env;
}

}  // namespace compare
