// An nn::Linear layer as the reference Fashion-MNIST network uses it: 3136 -> 128 on a batch of 64, forward and
// forward + backward (input, weight and bias gradients), on the CPU and, when one is available, on a GPU.

#include <benchmark/benchmark.h>

#include <cstdint>

#include "strata/nn/layers.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"

namespace {

using strata::Tensor;

constexpr int64_t kBatch = 64, kIn = 3136, kOut = 128;
constexpr double kForwardFlops = 2.0 * kBatch * kIn * kOut;

struct Bench {
  explicit Bench(strata::Device device) : layer(kIn, kOut) {
    layer.to(device);
    input = strata::randn({kBatch, kIn}, strata::TensorOptions().device(device)).requires_grad_();
    grad_output = strata::ones({kBatch, kOut}, strata::TensorOptions().device(device));
  }
  Tensor forward() { return layer(input); }
  void forward_backward() {
    layer.zero_grad();
    input.set_grad(Tensor());
    forward().backward(grad_output);
  }
  strata::nn::Linear layer;
  Tensor input, grad_output;
};

void set_rate(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_LinearForward(benchmark::State& state) {
  Bench b(strata::kCPU);
  for (auto _ : state) benchmark::DoNotOptimize(b.forward().data_ptr());
  set_rate(state, kForwardFlops);
}
void BM_LinearForwardBackward(benchmark::State& state) {
  Bench b(strata::kCPU);
  for (auto _ : state) {
    b.forward_backward();
    benchmark::DoNotOptimize(b.layer.weight.grad().data_ptr());
  }
  set_rate(state, 3 * kForwardFlops);
}
BENCHMARK(BM_LinearForward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LinearForwardBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);

// On the GPU each iteration is timed with events around the work (manual time).
void cuda_run(benchmark::State& state, bool backward) {
  const strata::Device gpu(strata::DeviceType::CUDA, 0);
  Bench b(gpu);
  b.forward_backward();  // warm-up: cuBLAS handle, workspace
  strata::Event start(gpu), end(gpu);
  for (auto _ : state) {
    start.record();
    if (backward) {
      b.forward_backward();
    } else {
      benchmark::DoNotOptimize(b.forward().data_ptr());
    }
    end.record();
    end.synchronize();
    state.SetIterationTime(end.elapsed_ms_since(start) / 1e3);
  }
  set_rate(state, backward ? 3 * kForwardFlops : kForwardFlops);
  state.SetLabel(strata::cuda::device_name(0));
}

const bool cuda_registered = [] {
  if (!strata::cuda::is_available()) return false;
  benchmark::RegisterBenchmark("BM_LinearForward/cuda", [](benchmark::State& s) { cuda_run(s, false); })
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_LinearForwardBackward/cuda", [](benchmark::State& s) { cuda_run(s, true); })
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
