// strata-bench-dist: all_reduce bandwidth of Strata's ProcessGroup against Open MPI's own MPI_Allreduce, in one run
// under mpiexec (strata-bench's "dist" workload starts it). Rank 0 prints one JSON document.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "strata/dist/process_group.h"
#include "strata/tensor/factories.h"

using namespace strata;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Median over `rounds` of the mean time of `calls` calls; every rank runs the same rounds (the barrier lines them up).
template <typename F>
double median_call_seconds(F&& call, int rounds, int calls) {
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    times.push_back(seconds_since(start) / calls);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string_view(argv[1]) == "--quick";
  int provided = 0;
  // Initialised here with full thread support, so that this thread can call MPI itself while the group's
  // communication thread is idle; the group then uses the running MPI.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  dist::ProcessGroup& group = dist::init();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  const int max_shift = quick ? 20 : 26;  // up to 1 MiB or 64 MiB
  for (int shift = 10; shift <= max_shift; shift += 2) {
    const std::size_t bytes = std::size_t{1} << shift;
    const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
    // Both from Strata's allocator (huge pages for large buffers), so that the two differ only in the call: single-copy
    // transfers between processes are several times faster from huge pages than from malloc'ed memory.
    Tensor t = ones({n});
    Tensor raw = ones({n});
    const int calls = std::max(1, static_cast<int>((std::size_t{64} << 20) / bytes / (quick ? 16 : 4)));
    const int rounds = quick ? 3 : 7;
    // In turns, so that both see the same machine.
    double mpi = 0, strata = 0;
    for (int turn = 0; turn < 2; ++turn) {
      mpi += median_call_seconds(
          [&] {
            MPI_Allreduce(MPI_IN_PLACE, raw.data_ptr(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          },
          rounds, calls);
      strata += median_call_seconds([&] { group.all_reduce(t)->wait(); }, rounds, calls);
    }
    rows.push_back({{"bytes", bytes}, {"mpi_us", mpi / 2 * 1e6}, {"strata_us", strata / 2 * 1e6}});
  }
  if (rank == 0) {
    nlohmann::ordered_json out = {{"ranks", size}, {"rows", rows}};
    std::printf("%s\n", out.dump().c_str());
  }
  MPI_Finalize();
  return 0;
}
