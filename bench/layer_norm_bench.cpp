// layer_norm at nanoGPT's CPU shape ([12, 64, 128] f32 over the last dim, with weight and bias): the fused kernels
// against the composition of tensor ops (mean, var, sub, mul, rsqrt, add and their derivatives), forward alone
// (no grad) and forward + backward (the gradients of x, weight and bias). Run with OMP_NUM_THREADS=1 to time one
// core; on cuda:0 as well when a GPU is available (synchronised each iteration).

#include <benchmark/benchmark.h>

#include "strata/autograd/grad_mode.h"
#include "strata/nn/normalization.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/parallel.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"

namespace {

namespace F = strata::nn::functional;
using strata::Device;
using strata::Tensor;

const Device kGpu(strata::DeviceType::CUDA, 0);

void layer_norm(benchmark::State& state, Device device, F::LayerNormImpl impl, bool backward) {
  if (!device.is_cpu() && !strata::cuda::is_available()) {
    state.SkipWithError("CUDA unavailable");
    return;
  }
  const strata::TensorOptions options = strata::TensorOptions(strata::DType::F32).device(device);
  Tensor x = strata::randn({12, 64, 128}, options), w = strata::ones({128}, options), b = strata::zeros({128}, options);
  const Tensor g = strata::randn({12, 64, 128}, options);
  for (Tensor* t : {&x, &w, &b}) t->requires_grad_(backward);
  for (auto _ : state) {
    if (backward) {
      const Tensor y = F::layer_norm(x, {128}, w, b, 1e-5, impl);
      strata::sum(y * g).backward();
      for (Tensor* t : {&x, &w, &b}) t->set_grad(Tensor());
    } else {
      const strata::NoGradGuard no_grad;
      benchmark::DoNotOptimize(F::layer_norm(x, {128}, w, b, 1e-5, impl));
    }
    if (!device.is_cpu()) strata::synchronize(device);
  }
  state.SetItemsProcessed(state.iterations() * x.numel());
  state.counters["threads"] = strata::num_threads();
}

void BM_LayerNormFused(benchmark::State& state) { layer_norm(state, strata::kCPU, F::LayerNormImpl::kFused, false); }
void BM_LayerNormComposed(benchmark::State& state) {
  layer_norm(state, strata::kCPU, F::LayerNormImpl::kComposed, false);
}
void BM_LayerNormFusedBackward(benchmark::State& state) {
  layer_norm(state, strata::kCPU, F::LayerNormImpl::kFused, true);
}
void BM_LayerNormComposedBackward(benchmark::State& state) {
  layer_norm(state, strata::kCPU, F::LayerNormImpl::kComposed, true);
}
void BM_CudaLayerNormFusedBackward(benchmark::State& state) { layer_norm(state, kGpu, F::LayerNormImpl::kFused, true); }
void BM_CudaLayerNormComposedBackward(benchmark::State& state) {
  layer_norm(state, kGpu, F::LayerNormImpl::kComposed, true);
}

BENCHMARK(BM_LayerNormFused)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LayerNormComposed)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LayerNormFusedBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LayerNormComposedBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaLayerNormFusedBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaLayerNormComposedBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
