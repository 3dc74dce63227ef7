// The distributed workload of strata-bench: all_reduce between two processes on this machine, Strata's ProcessGroup
// against Open MPI's MPI_Allreduce in the same run, and the share of DDP's all-reduce time that backward hides
// (strata-bench-dist under mpiexec).
#include <fmt/format.h>

#include <array>
#include <cstdio>
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

WorkloadResult dist(const RunOptions& o) {
  WorkloadResult r;
#ifdef STRATA_BENCH_MPIEXEC
  const std::string program = o.self_dir + "/strata-bench-dist";
  // Two ranks of one thread each: one per core of a 2-core machine.
  const std::string command = fmt::format(
      "OMP_NUM_THREADS=1 {} -n 2 --allow-run-as-root --oversubscribe --bind-to none {}{} 2>&1", STRATA_BENCH_MPIEXEC,
      program, o.quick ? " --quick" : "");
  const std::string out = output_of(command);
  const auto json = nlohmann::json::parse(out.substr(out.find('{')));
  for (const auto& row : json["rows"]) {
    const auto bytes = row["bytes"].get<std::size_t>();
    const std::string size = bytes >= (1u << 20) ? fmt::format("{}MiB", bytes >> 20) : fmt::format("{}KiB", bytes >> 10);
    const double strata_us = row["strata_us"], mpi_us = row["mpi_us"];
    r.metrics.push_back({"allreduce_" + size + "_us", strata_us, "us", Better::Lower,
                         fmt::format("ProcessGroup all_reduce + wait, f32 sum, 2 ranks; MPI_Allreduce {:.1f} us", mpi_us)});
    r.metrics.push_back({"allreduce_" + size + "_vs_mpi", mpi_us / strata_us, "x MPI", Better::Higher,
                         "MPI_Allreduce time / Strata's: target >= 0.9"});
  }
  const auto& ddp = json["ddp"];
  r.metrics.push_back({"ddp_step_ms", ddp["step_ms"].get<double>(), "ms", Better::Lower,
                       fmt::format("reference network, batch 64 a rank, forward+backward with DDP; {:.1f} ms with "
                                   "no_sync(), {:.1f} ms for the {} buckets' all-reduces alone, {:.1f} ms waited at the "
                                   "end of backward",
                                   ddp["no_sync_step_ms"].get<double>(), ddp["allreduce_ms"].get<double>(),
                                   ddp["buckets"].get<int>(), ddp["end_wait_ms"].get<double>())});
  r.metrics.push_back({"ddp_allreduce_hidden", ddp["hidden_fraction"].get<double>(), "fraction", Better::Higher,
                       "1 - (step - no_sync step) / all-reduces alone (Note [Measuring the all-reduce time backward "
                       "hides] in dist_allreduce.cpp)"});
  r.notes.push_back("command: " + command);
#else
  (void)o;
  r.skipped = true;
  r.skip_reason = "this build has no MPI (install libopenmpi-dev and rebuild)";
#endif
  return r;
}

}  // namespace

std::vector<Workload> dist_workloads() {
  return {{"dist", "9. all_reduce between two processes, against Open MPI's MPI_Allreduce; DDP's overlap with backward", dist}};
}

}  // namespace strata::bench
