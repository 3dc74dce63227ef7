// conv2d throughput at a ResNet-like layer: input [64, 32, 14, 14], weight [64, 32, 3, 3], padding 1. Forward,
// forward with fused ReLU, and forward + backward (input, weight and bias gradients) on the CPU (oneDNN for f32,
// im2col + OpenBLAS for f64); the same on a GPU (cuDNN), registered only when one is available.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "strata/nn/functional.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace {

using strata::Tensor;
namespace F = strata::nn::functional;

constexpr int64_t kN = 64, kC = 32, kH = 14, kW = 14, kO = 64, kK = 3;

// Multiply-adds of the forward pass, counted twice; backward costs two such passes (data and weights).
constexpr double kForwardFlops = 2.0 * kN * kO * kH * kW * kC * kK * kK;

struct Layer {
  Layer(strata::Device device, strata::DType dtype, bool grad) {
    const strata::TensorOptions options = strata::TensorOptions(dtype).device(device);
    input = strata::randn({kN, kC, kH, kW}, strata::DType::F32).to(dtype).to(device);
    weight = (strata::randn({kO, kC, kK, kK}, strata::DType::F32) * 0.1).to(dtype).to(device);
    bias = strata::zeros({kO}, options);
    grad_output = strata::ones({kN, kO, kH, kW}, options);
    if (grad) {
      input.requires_grad_();
      weight.requires_grad_();
      bias.requires_grad_();
    }
  }
  Tensor forward(bool relu = false) const {
    return relu ? F::conv2d_relu(input, weight, bias, 1, 1) : F::conv2d(input, weight, bias, 1, 1);
  }
  void forward_backward() {
    input.set_grad(Tensor());
    weight.set_grad(Tensor());
    bias.set_grad(Tensor());
    forward().backward(grad_output);
  }
  Tensor input, weight, bias, grad_output;
};

void set_rate(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kN);  // images per second
}

void cpu_forward(benchmark::State& state, strata::DType dtype, bool relu) {
  const Layer layer(strata::kCPU, dtype, false);
  for (auto _ : state) benchmark::DoNotOptimize(layer.forward(relu).data_ptr());
  set_rate(state, kForwardFlops);
}
void BM_Conv2dForwardF32(benchmark::State& state) { cpu_forward(state, strata::DType::F32, false); }
void BM_Conv2dReluForwardF32(benchmark::State& state) { cpu_forward(state, strata::DType::F32, true); }
void BM_Conv2dForwardF64(benchmark::State& state) { cpu_forward(state, strata::DType::F64, false); }

void cpu_forward_backward(benchmark::State& state, strata::DType dtype) {
  Layer layer(strata::kCPU, dtype, true);
  for (auto _ : state) {
    layer.forward_backward();
    benchmark::DoNotOptimize(layer.weight.grad().data_ptr());
  }
  set_rate(state, 3 * kForwardFlops);
}
void BM_Conv2dForwardBackwardF32(benchmark::State& state) { cpu_forward_backward(state, strata::DType::F32); }
void BM_Conv2dForwardBackwardF64(benchmark::State& state) { cpu_forward_backward(state, strata::DType::F64); }

// On the GPU each iteration is timed with events around the work (manual time).
void cuda_run(benchmark::State& state, bool backward, bool tf32) {
  const strata::Device gpu(strata::DeviceType::CUDA, 0);
  strata::set_allow_tf32(tf32);
  Layer layer(gpu, strata::DType::F32, backward);
  // Warm-up: cuDNN handle, algorithm choice, workspace.
  if (backward) {
    layer.forward_backward();
  } else {
    layer.forward();
  }
  strata::Event start(gpu), end(gpu);
  for (auto _ : state) {
    start.record();
    if (backward) {
      layer.forward_backward();
    } else {
      benchmark::DoNotOptimize(layer.forward().data_ptr());
    }
    end.record();
    end.synchronize();
    state.SetIterationTime(end.elapsed_ms_since(start) / 1e3);
  }
  strata::set_allow_tf32(false);
  set_rate(state, backward ? 3 * kForwardFlops : kForwardFlops);
  state.SetLabel(strata::cuda::device_name(0));
}

BENCHMARK(BM_Conv2dForwardF32)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Conv2dReluForwardF32)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Conv2dForwardF64)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Conv2dForwardBackwardF32)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Conv2dForwardBackwardF64)->UseRealTime()->Unit(benchmark::kMillisecond);

const bool cuda_registered = [] {
  if (!strata::cuda::is_available()) return false;
  for (const bool tf32 : {false, true}) {
    const char* suffix = tf32 ? "TF32" : "F32";
    benchmark::RegisterBenchmark((std::string("BM_CudaConv2dForward") + suffix).c_str(),
                                 [tf32](benchmark::State& s) { cuda_run(s, false, tf32); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("BM_CudaConv2dForwardBackward") + suffix).c_str(),
                                 [tf32](benchmark::State& s) { cuda_run(s, true, tf32); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
