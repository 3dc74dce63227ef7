// Reduction throughput: the sum of 10M f32 values (GB/s read), sums along the inner and the outer dim of a matrix,
// and softmax over [1024, 1024] f32 (GB/s read + written); on the CPU and, when one is available, on a GPU.

#include <benchmark/benchmark.h>

#include <string>

#include "strata/runtime/cuda.h"
#include "strata/runtime/parallel.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace {

using strata::Tensor;

constexpr int64_t kSumElements = 10'000'000;

void set_bandwidth(benchmark::State& state, double bytes) {
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// The workloads: what runs, on what input, and how many bytes it moves.
struct Workload {
  Tensor x;
  double bytes;
  Tensor (*run)(const Tensor&);
};

Workload sum_all(strata::Device d) {
  return {strata::rand({kSumElements}, strata::TensorOptions().device(d)), 4.0 * kSumElements,
          [](const Tensor& x) { return strata::sum(x); }};
}
Workload sum_rows(strata::Device d) {  // [1000, 10000] over dim 1: contiguous rows
  return {strata::rand({1000, 10000}, strata::TensorOptions().device(d)), 4.0 * 1e7,
          [](const Tensor& x) { return strata::sum(x, {1}); }};
}
Workload sum_columns(strata::Device d) {  // [10000, 1000] over dim 0: rows with stride 1000
  return {strata::rand({10000, 1000}, strata::TensorOptions().device(d)), 4.0 * 1e7,
          [](const Tensor& x) { return strata::sum(x, {0}); }};
}
Workload softmax_1024(strata::Device d) {
  return {strata::rand({1024, 1024}, strata::TensorOptions().device(d)), 2 * 4.0 * 1024 * 1024,
          [](const Tensor& x) { return strata::softmax(x, 1); }};
}

void on_cpu(benchmark::State& state, Workload (*make)(strata::Device)) {
  const Workload w = make(strata::kCPU);
  for (auto _ : state) benchmark::DoNotOptimize(w.run(w.x).data_ptr());
  set_bandwidth(state, w.bytes);
  state.SetLabel(std::to_string(strata::num_threads()) + " threads");
}

// On the GPU, events time a batch of launches (manual time), so that host launch latency hides behind the queue.
void on_cuda(benchmark::State& state, Workload (*make)(strata::Device)) {
  if (!strata::cuda::is_available()) {
    state.SkipWithError(("CUDA unavailable: " + strata::cuda::unavailable_reason()).c_str());
    return;
  }
  constexpr int kBatch = 20;
  const strata::Device gpu(strata::DeviceType::CUDA, 0);
  const Workload w = make(gpu);
  w.run(w.x);  // warm-up: allocator and module load
  strata::synchronize(gpu);
  strata::Event start(gpu), end(gpu);
  for (auto _ : state) {
    start.record();
    for (int i = 0; i < kBatch; ++i) benchmark::DoNotOptimize(w.run(w.x).data_ptr());
    end.record();
    end.synchronize();
    state.SetIterationTime(end.elapsed_ms_since(start) / 1e3 / kBatch);
  }
  set_bandwidth(state, w.bytes);
  state.SetLabel(strata::cuda::device_name(0));
}

void BM_SumF32_10M(benchmark::State& s) { on_cpu(s, sum_all); }
void BM_SumF32_Rows(benchmark::State& s) { on_cpu(s, sum_rows); }
void BM_SumF32_Columns(benchmark::State& s) { on_cpu(s, sum_columns); }
void BM_SoftmaxF32_1024x1024(benchmark::State& s) { on_cpu(s, softmax_1024); }
void BM_CudaSumF32_10M(benchmark::State& s) { on_cuda(s, sum_all); }
void BM_CudaSumF32_Rows(benchmark::State& s) { on_cuda(s, sum_rows); }
void BM_CudaSumF32_Columns(benchmark::State& s) { on_cuda(s, sum_columns); }
void BM_CudaSoftmaxF32_1024x1024(benchmark::State& s) { on_cuda(s, softmax_1024); }

BENCHMARK(BM_SumF32_10M)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SumF32_Rows)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SumF32_Columns)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SoftmaxF32_1024x1024)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaSumF32_10M)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaSumF32_Rows)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaSumF32_Columns)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaSoftmaxF32_1024x1024)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
