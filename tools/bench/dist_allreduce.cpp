// strata-bench-dist, under mpiexec (strata-bench's "dist" workload starts it): all_reduce bandwidth of Strata's
// ProcessGroup against Open MPI's own MPI_Allreduce, and how much of DistributedDataParallel's all-reduce time the
// backward pass hides, in one run. Rank 0 prints one JSON document.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/dist/ddp.h"
#include "strata/dist/device_collectives.h"
#include "strata/dist/process_group.h"
#include "strata/nn/functional.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/random.h"
#include "trainer.h"

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

// Note [Measuring the all-reduce time backward hides]
// A training step of the reference network (batch 64 a rank, forward and backward, no optimizer step) is timed
// three ways, in turns: with DDP as it trains (`sync`), under no_sync() (no communication at all), and the
// all-reduces of DDP's buckets alone, one after another, with nothing to hide behind (`comm`). What the step pays for
// communication is sync - no_sync; the part hidden behind backward is 1 - (sync - no_sync) / comm. On two cores,
// with one rank a core, the communication thread takes its time from the same core as the compute, so "hidden"
// means that the transfer waited on the other rank while this one computed.
nlohmann::ordered_json ddp_overlap(dist::ProcessGroup& group, bool quick) {
  manual_seed(1);
  auto model = train::reference_network(kCPU);
  dist::DistributedDataParallel ddp(model, group);
  const Tensor x = randn({64, 1, 28, 28});
  const Tensor y = randint(0, 10, {64});
  const auto step = [&] {
    model->zero_grad();
    nn::functional::cross_entropy((*model)(x), y).backward();
  };
  std::vector<Tensor> flats;
  for (const auto& bucket : ddp.bucket_layout()) {
    int64_t n = 0;
    for (std::size_t k : bucket) n += model->parameters()[k].numel();
    flats.push_back(zeros({n}));
  }
  const int steps = quick ? 3 : 10;
  const int rounds = quick ? 3 : 5;
  double sync = 0, no_sync = 0, comm = 0, end_wait = 0;
  step();  // warm-up: the caching allocator and oneDNN's primitives
  for (int turn = 0; turn < 2; ++turn) {
    sync += median_call_seconds(
        [&] {
          step();
          end_wait += ddp.last_wait_seconds();
        },
        rounds, steps);
    no_sync += median_call_seconds(
        [&] {
          const auto guard = ddp.no_sync();
          step();
        },
        rounds, steps);
    comm += median_call_seconds(
        [&] {
          for (Tensor& f : flats) group.all_reduce(f, dist::ReduceOp::Avg)->wait();
        },
        rounds, steps);
  }
  sync /= 2;
  no_sync /= 2;
  comm /= 2;
  end_wait /= 2.0 * rounds * steps;
  const double hidden = comm > 0 ? std::clamp(1 - (sync - no_sync) / comm, 0.0, 1.0) : 0.0;
  return {{"step_ms", sync * 1e3},         {"no_sync_step_ms", no_sync * 1e3}, {"allreduce_ms", comm * 1e3},
          {"end_wait_ms", end_wait * 1e3}, {"buckets", flats.size()},          {"hidden_fraction", hidden}};
}

// A collective library for CPU tensors that moves nothing: a device group over it costs what the host pays for a
// collective on a device (the ranks' agreement, Note [A direct path to the device's library] in
// strata/dist/device_group.cpp, and the issue of the call), which a machine without GPUs can time.
class NoCommunicator final : public dist::DeviceCommunicator {
 public:
  void all_reduce(const void*, void*, int64_t, DType, dist::ReduceOp, NativeStream) override {}
  void broadcast(void*, int64_t, DType, int, NativeStream) override {}
  void all_gather(const void*, void*, int64_t, DType, NativeStream) override {}
  void reduce_scatter(const void*, void*, int64_t, DType, dist::ReduceOp, NativeStream) override {}
  std::string async_error() override { return {}; }
  void abort() noexcept override {}
};

class NoLibrary final : public dist::CollectiveLibrary {
 public:
  std::string name() const override { return "none"; }
  bool available(std::string*) override { return true; }
  bool supports(DType) const override { return true; }
  std::vector<uint8_t> new_group_id() override { return {1}; }
  std::unique_ptr<dist::DeviceCommunicator> connect(const std::vector<uint8_t>&, int, int, int) override {
    return std::make_unique<NoCommunicator>();
  }
};

// Microseconds per all_reduce(1 KiB)->wait() through a device group over NoLibrary: the host's part of a device
// collective.
double device_path_us(dist::ProcessGroup& world, bool quick) {
  dist::register_collective_library(DeviceType::CPU, std::make_shared<NoLibrary>());
  std::string why;
  auto group = dist::make_device_group(world, DeviceType::CPU, {}, &why);
  if (!group) {
    std::fprintf(stderr, "no device group over a library that moves nothing: %s\n", why.c_str());
    std::exit(1);
  }
  Tensor t = ones({256});
  const int calls = quick ? 1000 : 4000;
  group->all_reduce(t)->wait();  // the group id, once
  const double us = median_call_seconds([&] { group->all_reduce(t)->wait(); }, quick ? 3 : 7, calls) * 1e6;
  group.reset();
  dist::register_collective_library(DeviceType::CPU, nullptr);
  return us;
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
          [&] { MPI_Allreduce(MPI_IN_PLACE, raw.data_ptr(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
          rounds, calls);
      strata += median_call_seconds([&] { group.all_reduce(t)->wait(); }, rounds, calls);
    }
    rows.push_back({{"bytes", bytes}, {"mpi_us", mpi / 2 * 1e6}, {"strata_us", strata / 2 * 1e6}});
  }
  const double device_us = device_path_us(group, quick);
  const nlohmann::ordered_json ddp = ddp_overlap(group, quick);
  if (rank == 0) {
    nlohmann::ordered_json out = {{"ranks", size}, {"rows", rows}, {"device_path_1KiB_us", device_us}, {"ddp", ddp}};
    std::printf("%s\n", out.dump().c_str());
  }
  MPI_Finalize();
  return 0;
}
