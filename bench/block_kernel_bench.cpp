// What block kernels cost on the CPU (Note [Threads of a block on the CPU] in kernels/block.h): the per-block sums of
// N floats by launch_block (a tree in shared memory, a barrier per level), against the same sums by a plain loop per
// block (launch() with one thread per block), in wall-clock time since the pool runs them; and the cost of one
// barrier of a block, for 32 to 1024 threads.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "strata/kernels/launch.h"
#include "strata/runtime/parallel.h"

namespace {

using strata::kernels::LaunchSite;

constexpr int64_t kElements = 1 << 22;  // 16 MiB of floats

LaunchSite site(const char* kernel) { return LaunchSite(strata::kCPU, nullptr, kernel, "bench"); }

void set_rate(benchmark::State& state, int64_t elements) {
  state.SetItemsProcessed(state.iterations() * elements);
  state.SetBytesProcessed(state.iterations() * elements * static_cast<int64_t>(sizeof(float)));
  state.SetLabel(std::to_string(strata::num_threads()) + " threads");
}

// Block sums through shared memory: one element per GPU thread, log2(threads) + 1 barriers per block.
void BM_BlockSumBarriers(benchmark::State& state) {
  const auto threads = static_cast<std::uint32_t>(state.range(0));
  const std::vector<float> in(kElements, 1.0f);
  const std::uint32_t blocks = kElements / threads;
  std::vector<float> out(blocks);
  const float* x = in.data();
  float* y = out.data();
  for (auto _ : state) {
    strata::kernels::launch_block(
        site("block_sum"), {blocks}, {threads}, 0, STRATA_BLOCK_KERNEL(ctx) {
          STRATA_SHARED(ctx, float[1024], partial);
          const std::uint32_t t = ctx.idx.thread.x;
          partial[t] = x[ctx.idx.global_x()];
          STRATA_SYNCTHREADS();
          for (std::uint32_t stride = threads / 2; stride > 0; stride /= 2) {
            if (t < stride) partial[t] += partial[t + stride];
            STRATA_SYNCTHREADS();
          }
          if (t == 0) y[ctx.idx.block.x] = partial[0];
        });
    benchmark::DoNotOptimize(y);
    benchmark::ClobberMemory();
  }
  if (out[0] != static_cast<float>(threads)) state.SkipWithError("wrong sum");
  set_rate(state, kElements);
}
BENCHMARK(BM_BlockSumBarriers)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same sums, each block's by one thread's loop: what the CPU does without a barrier.
void BM_BlockSumPlainLoop(benchmark::State& state) {
  const auto threads = static_cast<std::uint32_t>(state.range(0));
  const std::vector<float> in(kElements, 1.0f);
  const std::uint32_t blocks = kElements / threads;
  std::vector<float> out(blocks);
  const float* x = in.data();
  float* y = out.data();
  for (auto _ : state) {
    strata::kernels::launch(site("loop_sum"), {blocks}, {1}, [=](const strata::kernels::ThreadIndex& idx) {
      const float* slice = x + static_cast<int64_t>(idx.block.x) * threads;
      float s = 0;
      for (std::uint32_t i = 0; i < threads; ++i) s += slice[i];
      y[idx.block.x] = s;
    });
    benchmark::DoNotOptimize(y);
    benchmark::ClobberMemory();
  }
  if (out[0] != static_cast<float>(threads)) state.SkipWithError("wrong sum");
  set_rate(state, kElements);
}
BENCHMARK(BM_BlockSumPlainLoop)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

// One block on the calling thread crossing kBarriers barriers with almost nothing between them: the time per
// barrier of the whole block (every thread suspended and resumed once), and per thread.
void BM_Barrier(benchmark::State& state) {
  constexpr int kBarriers = 1000;
  const auto threads = static_cast<std::uint32_t>(state.range(0));
  std::vector<std::uint32_t> sink(threads);
  std::uint32_t* s = sink.data();
  for (auto _ : state) {
    strata::kernels::launch_block(
        site("barriers"), {1}, {threads}, 0, STRATA_BLOCK_KERNEL(ctx) {
          std::uint32_t acc = ctx.idx.thread.x;
          for (int i = 0; i < kBarriers; ++i) {
            acc += static_cast<std::uint32_t>(i);
            STRATA_SYNCTHREADS();
          }
          s[ctx.idx.thread.x] = acc;
        });
    benchmark::DoNotOptimize(s);
  }
  // Seconds per barrier, printed with an SI prefix (n: nanoseconds).
  state.counters["per_barrier"] =
      benchmark::Counter(kBarriers, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["per_thread_barrier"] =
      benchmark::Counter(static_cast<double>(kBarriers) * threads,
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Barrier)->Arg(32)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

// A block that only starts and ends (one barrier): what making and destroying its coroutines costs per thread.
void BM_BlockStartAndEnd(benchmark::State& state) {
  const auto threads = static_cast<std::uint32_t>(state.range(0));
  std::vector<std::uint32_t> sink(threads);
  std::uint32_t* s = sink.data();
  for (auto _ : state) {
    strata::kernels::launch_block(
        site("start_end"), {1}, {threads}, 0, STRATA_BLOCK_KERNEL(ctx) {
          STRATA_SYNCTHREADS();
          s[ctx.idx.thread.x] = ctx.idx.thread.x;
        });
    benchmark::DoNotOptimize(s);
  }
  state.counters["per_thread"] =
      benchmark::Counter(threads, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_BlockStartAndEnd)->Arg(256)->Unit(benchmark::kMicrosecond);

}  // namespace
