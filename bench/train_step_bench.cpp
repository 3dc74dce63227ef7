// One training step of strata-train's reference network (batch 64, Fashion-MNIST shapes), taken apart: each layer's
// forward and forward+backward at the shapes it sees in the step, and the whole step (forward, cross-entropy,
// backward, SGD with momentum). Where the epoch's time goes, on the CPU; the layers' own benchmarks are
// conv_bench and linear_bench.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>

#include "strata/autograd/grad_mode.h"
#include "strata/nn/functional.h"
#include "strata/nn/layers.h"
#include "strata/optim/sgd.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "trainer.h"

namespace {

using strata::Shape;
using strata::Tensor;
namespace F = strata::nn::functional;

constexpr int64_t kBatch = 64;

// Inputs that ask for gradients, and a gradient of ones for the output.
struct Case {
  Tensor input;
  std::vector<Tensor> parameters;
};

Tensor leaf(const Shape& shape, double scale, bool grad) {
  Tensor t = strata::randn(shape, strata::DType::F32) * scale;
  if (grad) t.requires_grad_();
  return t;
}

void clear_grads(Case& c) {
  c.input.set_grad(Tensor());
  for (Tensor& p : c.parameters) p.set_grad(Tensor());
}

// `op` forward only (no graph recorded), or forward and backward with a gradient of ones.
void run(benchmark::State& state, Case c, const std::function<Tensor(const Case&)>& op, bool backward) {
  if (!backward) {
    const strata::NoGradGuard no_grad;
    for (auto _ : state) benchmark::DoNotOptimize(op(c).data_ptr());
  } else {
    const Tensor grad = strata::ones_like(op(c));
    for (auto _ : state) {
      clear_grads(c);
      op(c).backward(grad);
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kBatch);
}

Case conv1() { return {leaf({kBatch, 1, 28, 28}, 1, false), {leaf({32, 1, 3, 3}, 0.3, true), leaf({32}, 0, true)}}; }
Case conv2() {
  return {leaf({kBatch, 32, 14, 14}, 1, true), {leaf({64, 32, 3, 3}, 0.06, true), leaf({64}, 0, true)}};
}
Tensor conv(const Case& c) { return F::conv2d(c.input, c.parameters[0], c.parameters[1], 1, 1); }

void BM_Conv1(benchmark::State& s) { run(s, conv1(), conv, s.range(0) != 0); }
void BM_Conv2(benchmark::State& s) { run(s, conv2(), conv, s.range(0) != 0); }
void BM_Relu28(benchmark::State& s) {
  run(s, {leaf({kBatch, 32, 28, 28}, 1, true), {}}, [](const Case& c) { return strata::relu(c.input); },
      s.range(0) != 0);
}
void BM_MaxPool28(benchmark::State& s) {
  run(s, {leaf({kBatch, 32, 28, 28}, 1, true), {}}, [](const Case& c) { return F::max_pool2d(c.input, 2); },
      s.range(0) != 0);
}
void BM_MaxPool14(benchmark::State& s) {
  run(s, {leaf({kBatch, 64, 14, 14}, 1, true), {}}, [](const Case& c) { return F::max_pool2d(c.input, 2); },
      s.range(0) != 0);
}
void BM_Fc1(benchmark::State& s) {
  run(s, {leaf({kBatch, 3136}, 1, true), {leaf({128, 3136}, 0.02, true), leaf({128}, 0, true)}},
      [](const Case& c) { return F::linear(c.input, c.parameters[0], c.parameters[1]); }, s.range(0) != 0);
}
void BM_CrossEntropy(benchmark::State& s) {
  const Tensor target = strata::randint(0, 10, {kBatch});
  run(s, {leaf({kBatch, 10}, 1, true), {}}, [&](const Case& c) { return F::cross_entropy(c.input, target); },
      s.range(0) != 0);
}

// The whole step, as strata-train's reference recipe runs it (its network, from the trainer library).
void BM_Step(benchmark::State& state) {
  const auto net = strata::train::reference_network(strata::kCPU);
  strata::optim::SGD sgd(net->parameters(), strata::optim::SGDOptions(0.01).momentum(0.9));
  const Tensor images = strata::rand({kBatch, 1, 28, 28}, strata::DType::F32);
  const Tensor target = strata::randint(0, 10, {kBatch});
  for (auto _ : state) {
    const Tensor loss = F::cross_entropy((*net)(images), target);
    sgd.zero_grad();
    loss.backward();
    sgd.step();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kBatch);
}

// Argument 0: forward only; 1: forward and backward.
#define STEP_PART(name) BENCHMARK(name)->ArgName("backward")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond)
STEP_PART(BM_Conv1);
STEP_PART(BM_Relu28);
STEP_PART(BM_MaxPool28);
STEP_PART(BM_Conv2);
STEP_PART(BM_MaxPool14);
STEP_PART(BM_Fc1);
STEP_PART(BM_CrossEntropy);
BENCHMARK(BM_Step)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
