// The distributed workload of strata-bench: all_reduce between two processes on this machine, Strata's ProcessGroup
// against Open MPI's MPI_Allreduce in the same run, and the share of DDP's all-reduce time that backward hides
// (strata-bench-dist under mpiexec).
#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "suite.h"

namespace strata::bench {
namespace {

// Runs a shell command and returns its standard output; throws when it fails.
std::string output_of(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) throw std::runtime_error("could not run " + command);
  std::string out;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr) out += buffer.data();
  const int status = pclose(pipe.release());
  if (status != 0) throw std::runtime_error(fmt::format("`{}` failed (status {})", command, status));
  return out;
}

// The interpreter of PyTorch for the comparison with torch.distributed: STRATA_BENCH_TORCH_PYTHON, else the one
// bench/compare-pytorch-python/torch-venv installed into this build folder; empty when there is neither.
[[maybe_unused]] std::string torch_python(const RunOptions& o) {
  if (const char* set = std::getenv("STRATA_BENCH_TORCH_PYTHON"); set != nullptr && *set != '\0') return set;
  std::error_code ec;
  const std::filesystem::path venvs = std::filesystem::path(o.self_dir) / ".." / "compare-pytorch-python";
  for (const auto& entry : std::filesystem::directory_iterator(venvs, ec)) {
    if (std::filesystem::exists(entry.path() / "ready") && std::filesystem::exists(entry.path() / "bin/python")) {
      return (entry.path() / "bin/python").string();
    }
  }
  return {};
}

[[maybe_unused]] std::string size_name(std::size_t bytes) {
  return bytes >= (1u << 20) ? fmt::format("{}MiB", bytes >> 20) : fmt::format("{}KiB", bytes >> 10);
}

WorkloadResult dist(const RunOptions& o) {
  WorkloadResult r;
#ifdef STRATA_BENCH_MPIEXEC
  const std::string program = o.self_dir + "/strata-bench-dist";
  // Two ranks of one thread each: one per core of a 2-core machine.
  const std::string command =
      fmt::format("OMP_NUM_THREADS=1 {} -n 2 --allow-run-as-root --oversubscribe --bind-to none {}{} 2>&1",
                  STRATA_BENCH_MPIEXEC, program, o.quick ? " --quick" : "");
  const std::string out = output_of(command);
  const auto json = nlohmann::json::parse(out.substr(out.find('{')));
  // torch.distributed on gloo, what a PyTorch user runs on CPUs, timed the same way (bench/dist-torch/run alternates
  // the two over several rounds; here each runs once).
  std::map<std::size_t, double> torch_us;
  std::string torch_command;
  if (const std::string python = torch_python(o); !python.empty()) {
    torch_command = fmt::format(
        "OMP_NUM_THREADS=1 {} -n 2 --allow-run-as-root --oversubscribe --bind-to none {} "
        "{}/bench/dist-torch/gloo_allreduce.py{} 2>&1",
        STRATA_BENCH_MPIEXEC, python, STRATA_BENCH_SOURCE_DIR, o.quick ? " --quick" : "");
    const std::string torch_out = output_of(torch_command);
    const auto torch_json = nlohmann::json::parse(torch_out.substr(torch_out.rfind("{\"ranks\"")));
    for (const auto& row : torch_json["rows"]) torch_us[row["bytes"].get<std::size_t>()] = row["torch_us"];
  }
  for (const auto& row : json["rows"]) {
    const auto bytes = row["bytes"].get<std::size_t>();
    const std::string size = size_name(bytes);
    const double strata_us = row["strata_us"], mpi_us = row["mpi_us"];
    r.metrics.push_back(
        {"allreduce_" + size + "_us", strata_us, "us", Better::Lower,
         fmt::format("ProcessGroup all_reduce + wait, f32 sum, 2 ranks; MPI_Allreduce {:.1f} us", mpi_us)});
    r.metrics.push_back({"allreduce_" + size + "_vs_mpi", mpi_us / strata_us, "x MPI", Better::Higher,
                         "MPI_Allreduce time / Strata's: target >= 0.9 from 256 KiB"});
    if (const auto it = torch_us.find(bytes); it != torch_us.end()) {
      r.metrics.push_back(
          {"allreduce_" + size + "_vs_torch", it->second / strata_us, "x torch", Better::Higher,
           fmt::format("torch.distributed all_reduce on gloo {:.1f} us / Strata's: target > 1", it->second)});
    }
  }
  if (json.contains("device_path_1KiB_us")) {
    r.metrics.push_back({"device_path_1KiB_us", json["device_path_1KiB_us"].get<double>(), "us", Better::Lower,
                         "all_reduce + wait through a device group whose library moves nothing: the host's part of a "
                         "device collective (agreement and issue)"});
  }
  const auto& ddp = json["ddp"];
  r.metrics.push_back(
      {"ddp_step_ms", ddp["step_ms"].get<double>(), "ms", Better::Lower,
       fmt::format("reference network, batch 64 a rank, forward+backward with DDP; {:.1f} ms with "
                   "no_sync(), {:.1f} ms for the {} buckets' all-reduces alone, {:.1f} ms waited at the "
                   "end of backward",
                   ddp["no_sync_step_ms"].get<double>(), ddp["allreduce_ms"].get<double>(), ddp["buckets"].get<int>(),
                   ddp["end_wait_ms"].get<double>())});
  r.metrics.push_back({"ddp_allreduce_hidden", ddp["hidden_fraction"].get<double>(), "fraction", Better::Higher,
                       "1 - (step - no_sync step) / all-reduces alone (Note [Measuring the all-reduce time backward "
                       "hides] in dist_allreduce.cpp)"});
  r.notes.push_back("command: " + command);
  if (torch_command.empty()) {
    r.notes.push_back(
        "torch.distributed not compared: no PyTorch here (bench/compare-pytorch-python/torch-venv BUILD "
        "installs it into the build folder, or set STRATA_BENCH_TORCH_PYTHON)");
  } else {
    r.notes.push_back("torch.distributed: " + torch_command);
  }
#else
  (void)o;
  r.skipped = true;
  r.skip_reason = "this build has no MPI (install libopenmpi-dev and rebuild)";
#endif
  return r;
}

}  // namespace

std::vector<Workload> dist_workloads() {
  return {{"dist", "9. all_reduce between two processes, against Open MPI's MPI_Allreduce; DDP's overlap with backward",
           dist}};
}

}  // namespace strata::bench
