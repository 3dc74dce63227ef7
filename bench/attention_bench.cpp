// scaled_dot_product_attention on the CPU, f32, causal: the fused kernel against the composed formula (matmul, mask,
// softmax, matmul), forward and forward + backward, at nanoGPT's shakespeare-char CPU shape (batch 12, 4 heads,
// T = 64, head dim 32) and at T = 1024. Results in docs/benchmarks.md ("Attention on the CPU").

#include <benchmark/benchmark.h>

#include <optional>
#include <string>

#include "strata/nn/functional.h"
#include "strata/runtime/parallel.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace {

namespace F = strata::nn::functional;
using strata::Tensor;

void attention(benchmark::State& state, F::AttentionImpl impl, bool backward) {
  const int64_t T = state.range(0);
  const strata::Shape shape{12, 4, T, 32};
  Tensor q = strata::randn(shape), k = strata::randn(shape), v = strata::randn(shape);
  const Tensor up = strata::randn(shape);
  if (backward) {
    for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
  }
  for (auto _ : state) {
    const Tensor out = F::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt, impl);
    if (backward) {
      out.backward(up);
      benchmark::DoNotOptimize(q.grad().data_ptr());
      for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
    } else {
      benchmark::DoNotOptimize(out.data_ptr());
    }
  }
  state.SetLabel(std::to_string(strata::num_threads()) + " threads");
}

void fused_forward(benchmark::State& s) { attention(s, F::AttentionImpl::kFused, false); }
void composed_forward(benchmark::State& s) { attention(s, F::AttentionImpl::kComposed, false); }
void fused_forward_backward(benchmark::State& s) { attention(s, F::AttentionImpl::kFused, true); }
void composed_forward_backward(benchmark::State& s) { attention(s, F::AttentionImpl::kComposed, true); }

BENCHMARK(fused_forward)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(composed_forward)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(fused_forward_backward)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(composed_forward_backward)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
