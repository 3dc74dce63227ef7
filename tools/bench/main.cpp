// strata-bench: the benchmark suite (matrix product, the D2L exercise, vector add, two devices, conv2d and Linear,
// a training epoch, per-op overhead, start-up and compile time, contention) as a table, or one JSON document with
// --json.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "strata/data/idx.h"
#include "strata/runtime/cpu_devices.h"
#include "strata/runtime/cuda.h"
#include "suite.h"
#include "tools/tool_output.h"

namespace {

std::string executable_dir(const char* argv0) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::absolute(argv0) : self).parent_path().string();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace strata::bench;
  std::string names_help = "workloads to run, comma-separated (default: all):";
  for (const Workload& w : workloads()) names_help += " " + w.name;
  CLI::App app{"strata-bench: Strata's performance on this machine, workload by workload"};
  bool as_json = false, list = false;
  std::vector<std::string> only;
  RunOptions options;
  options.data_dir = std::string(strata::data::kFashionMnistDir);
  app.add_flag("--json", as_json, "print one JSON document instead of the table");
  app.add_option("--only", only, names_help)->delimiter(',');
  app.add_flag("--quick", options.quick, "fewer sizes and repetitions, a subset of the training data");
  app.add_option("--data", options.data_dir, "directory with the Fashion-MNIST IDX files")->capture_default_str();
  app.add_flag("--list", list, "list the workloads and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "strata-bench: %s\nRun 'strata-bench --help' for the options.\n", e.what());
    return 2;
  }
  if (list) {
    for (const Workload& w : workloads()) std::printf("%-12s %s\n", w.name.c_str(), w.title.c_str());
    return strata::tools::stdout_written("strata-bench") ? 0 : 1;
  }
  std::set<std::string> wanted(only.begin(), only.end());
  for (const std::string& name : wanted) {
    bool known = false;
    for (const Workload& w : workloads()) known = known || w.name == name;
    if (!known) {
      std::fprintf(stderr, "strata-bench: unknown workload '%s' (--list shows them)\n", name.c_str());
      return 2;
    }
  }
  // The two-device workload runs on two virtual CPU devices when there are not two GPUs; they must exist before the
  // first CPU allocation. Other workloads use cpu:0, which is unchanged.
  if (wanted.empty() || wanted.count("two_devices") != 0) {
    try {
      if (strata::cuda::device_count() < 2 && strata::cpu_device_count() < 2) strata::set_cpu_device_count(2);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "strata-bench: %s\n", e.what());
      return 2;
    }
  }
  options.self_dir = executable_dir(argv[0]);
  std::vector<WorkloadResult> results;
  int failures = 0;
  for (const Workload& w : workloads()) {
    if (!wanted.empty() && wanted.count(w.name) == 0) continue;
    if (!as_json) std::fprintf(stderr, "strata-bench: running %s ...\n", w.name.c_str());
    WorkloadResult r;
    try {
      r = w.run(options);
    } catch (const std::exception& e) {
      r.skipped = true;
      r.skip_reason = std::string("failed: ") + e.what();
      ++failures;
    }
    r.name = w.name;
    r.title = w.title;
    results.push_back(std::move(r));
  }
  try {
    if (as_json) {
      std::cout << to_json(results).dump(2) << "\n";
    } else {
      std::cout << format_table(results);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-bench: error: reporting the results failed: %s\n", e.what());
    return 1;
  }
  if (failures > 0) std::fprintf(stderr, "strata-bench: %d workload(s) failed\n", failures);
  if (!strata::tools::stdout_written("strata-bench")) return 1;
  return failures > 0 ? 1 : 0;
}
