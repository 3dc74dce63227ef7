// Kernels compiled at run time on the CPU (strata::jit::RawKernel), beside the built-in ops that do the same work:
//   (1) c = a + b on 10M floats as a RawKernel into existing memory, against strata::add (result allocated), add_
//       (in place) and a plain loop split by strata::parallel_for -- GB/s counts 12 bytes per element;
//   (2) what a launch costs beyond its work (16 elements), and RawKernel construction + launch with the module
//       already loaded (the disk cache and dlopen answer);
//   (3) a block reduction and a 16 x 16 tiled matrix product through __shared__ memory and __syncthreads()
//       (coroutines on the CPU), against strata::sum and strata::matmul.
// bench/jit-kernels/run measures the same from Python, beside Numba, and the first launch in a new process. Run with
// --benchmark_enable_random_interleaving=true --benchmark_repetitions=5 on a shared machine.

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "strata/jit/jit.h"
#include "strata/runtime/parallel.h"
#include "strata/strata.h"

namespace {

using strata::Tensor;
using strata::jit::RawKernel;

constexpr int64_t kLarge = 10'000'000;
constexpr int64_t kBytesPerAdd = 3 * sizeof(float);  // read a, read b, write c

constexpr const char* kAdd = R"(
extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
)";

// Grid-stride sums in registers, then a tree in shared memory with a barrier per level.
constexpr const char* kBlockSum = R"(
extern "C" __global__ void block_sum(const float* x, float* partial, long long n) {
  __shared__ float s[256];
  float v = 0.0f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    v += x[i];
  s[threadIdx.x] = v;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}
)";
constexpr unsigned kSumThreads = 256, kSumBlocks = 1024;

constexpr const char* kTiledMatmul = R"(
#define TILE 16
extern "C" __global__ void tiled_matmul(const float* a, const float* b, float* c, int n) {
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += TILE) {
    as[threadIdx.y][threadIdx.x] = row < n && k0 + threadIdx.x < n ? a[row * n + k0 + threadIdx.x] : 0.0f;
    bs[threadIdx.y][threadIdx.x] = col < n && k0 + threadIdx.y < n ? b[(k0 + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < n && col < n) c[row * n + col] = acc;
}
)";
constexpr unsigned kTile = 16;

void set_bandwidth(benchmark::State& state, int64_t n) {
  state.SetBytesProcessed(state.iterations() * n * kBytesPerAdd);
  state.counters["threads"] = strata::num_threads();
}

struct Operands {
  explicit Operands(int64_t n) : a(strata::full({n}, 1.5f)), b(strata::full({n}, 2.0f)), c(strata::empty({n})) {}
  Tensor a, b, c;
};

/// The grid of the add kernel for n elements, 256 threads a block.
strata::jit::Dim3 add_grid(int64_t n) { return {static_cast<unsigned>((n + 255) / 256)}; }

// --- (1) vector add ---

void BM_JitAdd(benchmark::State& state) {
  Operands x(kLarge);
  const RawKernel add(kAdd, "add");
  add.compile_for(strata::kCPU);
  for (auto _ : state) {
    add(add_grid(kLarge), {256}, {x.a, x.b, x.c, kLarge});
    benchmark::ClobberMemory();
  }
  if (x.c.data<float>()[kLarge - 1] != 3.5f) state.SkipWithError("wrong sum");
  set_bandwidth(state, kLarge);
}
BENCHMARK(BM_JitAdd)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_BuiltinAdd(benchmark::State& state) {
  const Operands x(kLarge);
  for (auto _ : state) benchmark::DoNotOptimize(strata::add(x.a, x.b).data_ptr());
  set_bandwidth(state, kLarge);
}
BENCHMARK(BM_BuiltinAdd)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_BuiltinAddInPlace(benchmark::State& state) {
  Operands x(kLarge);
  for (auto _ : state) {
    strata::add_(x.c, x.b);
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, kLarge);
}
BENCHMARK(BM_BuiltinAddInPlace)->Unit(benchmark::kMillisecond)->UseRealTime();

/// The loop a compiler makes of the add with nothing in the way: what the RawKernel could reach.
void BM_PlainLoopParallelFor(benchmark::State& state) {
  Operands x(kLarge);
  const float* pa = x.a.data<float>();
  const float* pb = x.b.data<float>();
  float* pc = x.c.data<float>();
  for (auto _ : state) {
    strata::parallel_for(kLarge, 32768, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) pc[i] = pa[i] + pb[i];
    });
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, kLarge);
}
BENCHMARK(BM_PlainLoopParallelFor)->Unit(benchmark::kMillisecond)->UseRealTime();

// --- (2) launch costs ---

/// One launch of the add on 16 elements: argument checks, the parallel_for, the entry point.
void BM_JitLaunchTiny(benchmark::State& state) {
  Operands x(16);
  const RawKernel add(kAdd, "add");
  add.compile_for(strata::kCPU);
  for (auto _ : state) add(add_grid(16), {256}, {x.a, x.b, x.c, 16});
  state.counters["per_launch"] =
      benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_JitLaunchTiny);

/// RawKernel construction (scanning the source) + a first launch on 16 elements, the module already loaded in this
/// process: the source's key is hashed and the cache entry found and dlopened again (answered from memory).
void BM_JitConstructAndLaunch(benchmark::State& state) {
  Operands x(16);
  RawKernel(kAdd, "add").compile_for(strata::kCPU);  // the cache is warm from here on
  const strata::jit::CacheStats before = strata::jit::cache_stats();
  for (auto _ : state) {
    const RawKernel add(kAdd, "add");
    add(add_grid(16), {256}, {x.a, x.b, x.c, 16});
  }
  if (strata::jit::cache_stats().misses != before.misses) state.SkipWithError("compiled again");
}
BENCHMARK(BM_JitConstructAndLaunch)->Unit(benchmark::kMicrosecond);

// --- (3) shared memory and barriers ---

void BM_JitBlockSum(benchmark::State& state) {
  const Tensor x = strata::full({kLarge}, 1.0f);
  Tensor partial = strata::zeros({kSumBlocks}), total = strata::zeros({1});
  const RawKernel sum(kBlockSum, "block_sum");
  sum.compile_for(strata::kCPU);
  for (auto _ : state) {
    sum({kSumBlocks}, {kSumThreads}, {x, partial, kLarge});
    sum({1}, {kSumThreads}, {partial, total, static_cast<int64_t>(kSumBlocks)});
    benchmark::ClobberMemory();
  }
  if (total.data<float>()[0] != static_cast<float>(kLarge)) state.SkipWithError("wrong sum");
  state.SetBytesProcessed(state.iterations() * kLarge * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_JitBlockSum)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Sum(benchmark::State& state) {
  const Tensor x = strata::full({kLarge}, 1.0f);
  for (auto _ : state) benchmark::DoNotOptimize(strata::sum(x).data_ptr());
  state.SetBytesProcessed(state.iterations() * kLarge * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_Sum)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_JitTiledMatmul(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  const Tensor a = strata::randn({n, n}), b = strata::randn({n, n});
  Tensor c = strata::empty({n, n});
  const RawKernel mm(kTiledMatmul, "tiled_matmul");
  mm.compile_for(strata::kCPU);
  const unsigned tiles = (static_cast<unsigned>(n) + kTile - 1) / kTile;
  for (auto _ : state) {
    mm({tiles, tiles}, {kTile, kTile}, {a, b, c, n});
    benchmark::ClobberMemory();
  }
  const Tensor expected = strata::matmul(a, b);
  const float worst = strata::max(strata::abs(c - expected)).item<float>();
  if (!(worst < 1e-3f * std::sqrt(static_cast<float>(n)))) state.SkipWithError("wrong product");
  state.counters["flops"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_JitTiledMatmul)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Matmul(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  const Tensor a = strata::randn({n, n}), b = strata::randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(strata::matmul(a, b).data_ptr());
  state.counters["flops"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Matmul)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
