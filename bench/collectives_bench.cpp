// Collectives on a GPU: NCCL's all_reduce through strata/dist's device group, in a world of one on cuda:0 (the
// machines we are lent have one GPU, and NCCL refuses two ranks on one GPU). The figure is the time from issuing
// the collective to its end on the device, timed with events on the caller's stream, for 1 KiB to 64 MiB of f32:
// with one rank NCCL copies nothing between GPUs, so this is the fixed cost of a collective (issue, agreement, the
// hand-off to the group's thread, the stream ordering), not bandwidth between devices.

#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "strata/dist/device_collectives.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"

namespace {

using strata::Device;
using strata::Tensor;

const Device kGpu(strata::DeviceType::CUDA, 0);

void BM_CudaNcclAllReduce(benchmark::State& state) {
  if (!strata::cuda::is_available()) {
    state.SkipWithError(("CUDA unavailable: " + strata::cuda::unavailable_reason()).c_str());
    return;
  }
  static const auto host = strata::dist::make_local_group();
  std::string why;
  static const auto group = strata::dist::make_device_group(*host, strata::DeviceType::CUDA, {}, &why);
  if (group == nullptr) {
    state.SkipWithError(("no NCCL group: " + why).c_str());
    return;
  }
  const int64_t bytes = state.range(0);
  Tensor t = strata::ones({bytes / static_cast<int64_t>(sizeof(float))}, kGpu);
  group->all_reduce(t)->wait();  // the first collective connects the communicator
  strata::synchronize(kGpu);
  strata::Event start(kGpu);
  strata::Event end(kGpu);
  for (auto _ : state) {
    start.record();
    group->all_reduce(t)->wait();
    end.record();
    end.synchronize();
    state.SetIterationTime(end.elapsed_ms_since(start) / 1e3);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

}  // namespace

BENCHMARK(BM_CudaNcclAllReduce)->RangeMultiplier(4)->Range(1 << 10, 64 << 20)->UseManualTime()->Unit(
    benchmark::kMicrosecond);
