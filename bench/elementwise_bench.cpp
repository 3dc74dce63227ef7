// Elementwise throughput and per-op overhead:
//   (1) c = a + b on 10M f32 into existing memory (the "add" kernel through the op table, and in-place add_),
//       beside a plain hand-written loop over raw float arrays, single-threaded and split over the same OpenMP
//       pool (strata::parallel_for, which is `#pragma omp parallel` inside libstrata) -- GB/s counts bytes read
//       and written (12 per element);
//   (2) the same through strata::add, which allocates the result each time (from the caching allocator);
//   (3) the cost of one op on 16-element tensors, in ns per op, with its parts for comparison: empty() alone and
//       the kernel alone through the op table; index_select, whose kernel carries a device-side assert; and
//       current_stream(), the lookup of the stream that new work goes to;
//   (4) the transcendental kernels a Transformer runs (GELU in both forms and their derivatives, erf, sin, cos) on
//       nanoGPT's MLP activation [12, 64, 512] in f32, through the op table into existing memory; run with
//       OMP_NUM_THREADS=1 to time one core;
//   (5) an embedding's gradient: scatter_add of each token's gradient row into its row of the table, at nanoGPT's
//       two shakespeare_char shapes (768 tokens of 128 into 65 rows; 16384 tokens of 384);
// and the same on cuda:0 when a GPU is available (timed with events, or synchronised every batch).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "strata/ops/elementwise_kernels.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/parallel.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"

namespace {

using strata::Device;
using strata::Tensor;

constexpr int64_t kLarge = 10'000'000;
constexpr int64_t kTiny = 16;
constexpr int64_t kBytesPerAdd = 3 * sizeof(float);  // read a, read b, write c

const Device kGpu(strata::DeviceType::CUDA, 0);

void set_bandwidth(benchmark::State& state, int64_t n) {
  state.SetBytesProcessed(state.iterations() * n * kBytesPerAdd);
}

/// Skips a GPU benchmark with the reason when there is no usable GPU; true when it may run.
bool have_gpu(benchmark::State& state) {
  if (strata::cuda::is_available()) return true;
  state.SkipWithError(("CUDA unavailable: " + strata::cuda::unavailable_reason()).c_str());
  return false;
}

struct Operands {
  explicit Operands(int64_t n, Device device = strata::kCPU)
      : a(strata::full({n}, 1.5f, device)), b(strata::full({n}, 2.0f, device)), c(strata::empty({n}, device)) {}
  Tensor a, b, c;
};

// --- (1) into existing memory ---

void BM_PlainLoop(benchmark::State& state) {
  std::vector<float> a(kLarge, 1.5f), b(kLarge, 2.0f), c(kLarge);
  for (auto _ : state) {
    const float* pa = a.data();
    const float* pb = b.data();
    float* pc = c.data();
    for (int64_t i = 0; i < kLarge; ++i) pc[i] = pa[i] + pb[i];
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, kLarge);
}

void BM_PlainLoopOpenMP(benchmark::State& state) {
  std::vector<float> a(kLarge, 1.5f), b(kLarge, 2.0f), c(kLarge);
  const float* pa = a.data();
  const float* pb = b.data();
  float* pc = c.data();
  for (auto _ : state) {
    strata::parallel_for(kLarge, 32768, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) pc[i] = pa[i] + pb[i];
    });
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, kLarge);
  state.counters["threads"] = strata::num_threads();
}

/// The plain OpenMP loop on the memory of strata tensors: separates the memory's effect from the code's.
void BM_PlainLoopOpenMPOnTensors(benchmark::State& state) {
  const Operands x(kLarge);
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

/// The kernel that strata::add runs, called through the op table with an existing output.
void add_kernel_into(benchmark::State& state, Device device) {
  const Operands x(kLarge, device);
  static const strata::ops::KernelSlot<strata::ops::AddFn> slot("add");
  const auto kernel = slot.get(device);
  const auto call = strata::detail::op_call("add", device);
  const strata::TensorView out = x.c.view(), a = x.a.view(), b = x.b.view();
  if (device.is_cpu()) {
    for (auto _ : state) {
      kernel(call, out, a, b, 1);
      benchmark::ClobberMemory();
    }
  } else {
    strata::Event start(device), end(device);
    for (auto _ : state) {
      start.record();
      kernel(call, out, a, b, 1);
      end.record();
      end.synchronize();
      state.SetIterationTime(end.elapsed_ms_since(start) / 1e3);
    }
  }
  set_bandwidth(state, kLarge);
}
void BM_AddKernelInto(benchmark::State& state) { add_kernel_into(state, strata::kCPU); }
void BM_CudaAddKernelInto(benchmark::State& state) {
  if (have_gpu(state)) add_kernel_into(state, kGpu);
}

/// a += b: the public in-place op, the same 12 bytes per element.
void BM_AddInPlace(benchmark::State& state) {
  Operands x(kLarge);
  for (auto _ : state) {
    strata::add_(x.c, x.b);
    benchmark::ClobberMemory();
  }
  set_bandwidth(state, kLarge);
}

// --- (2) allocating the result ---

void add_allocating(benchmark::State& state, Device device) {
  const Operands x(kLarge, device);
  if (device.is_cpu()) {
    for (auto _ : state) benchmark::DoNotOptimize(strata::add(x.a, x.b).data_ptr());
  } else {
    strata::Event start(device), end(device);
    for (auto _ : state) {
      start.record();
      benchmark::DoNotOptimize(strata::add(x.a, x.b).data_ptr());
      end.record();
      end.synchronize();
      state.SetIterationTime(end.elapsed_ms_since(start) / 1e3);
    }
  }
  set_bandwidth(state, kLarge);
}
void BM_Add(benchmark::State& state) { add_allocating(state, strata::kCPU); }
void BM_CudaAdd(benchmark::State& state) {
  if (have_gpu(state)) add_allocating(state, kGpu);
}

// --- (4) transcendental kernels at nanoGPT's MLP shape ---

constexpr int64_t kActivation = 12 * 64 * 512;

/// One unary or binary kernel (b: GELU's input for the derivatives) over kActivation f32 values in [-4, 4].
void transcendental(benchmark::State& state, const char* op, bool binary) {
  const Tensor x = strata::linspace(-4.0, 4.0, kActivation), g = strata::full({kActivation}, 0.75f);
  const Tensor out = strata::empty({kActivation});
  const auto call = strata::detail::op_call(op, strata::kCPU);
  if (binary) {
    const strata::ops::KernelSlot<strata::ops::BinaryFn> slot(op);
    const auto kernel = slot.get(strata::kCPU);
    for (auto _ : state) {
      kernel(call, out.view(), g.view(), x.view());
      benchmark::ClobberMemory();
    }
  } else {
    const strata::ops::KernelSlot<strata::ops::UnaryFn> slot(op);
    const auto kernel = slot.get(strata::kCPU);
    for (auto _ : state) {
      kernel(call, out.view(), x.view());
      benchmark::ClobberMemory();
    }
  }
  state.SetItemsProcessed(state.iterations() * kActivation);
  state.counters["threads"] = strata::num_threads();
}
void BM_Gelu(benchmark::State& state) { transcendental(state, "gelu", false); }
void BM_GeluBackward(benchmark::State& state) { transcendental(state, "gelu_backward", true); }
void BM_GeluTanh(benchmark::State& state) { transcendental(state, "gelu_tanh", false); }
void BM_GeluTanhBackward(benchmark::State& state) { transcendental(state, "gelu_tanh_backward", true); }
void BM_Erf(benchmark::State& state) { transcendental(state, "erf", false); }
void BM_Sin(benchmark::State& state) { transcendental(state, "sin", false); }
void BM_Cos(benchmark::State& state) { transcendental(state, "cos", false); }
void BM_Exp(benchmark::State& state) { transcendental(state, "exp", false); }

// --- (5) an embedding's gradient ---

void embedding_gradient(benchmark::State& state) {
  const int64_t tokens = state.range(0), width = state.range(1), vocab = 65;
  const Tensor ids = strata::randint(0, vocab, {tokens, 1}).expand({tokens, width}).contiguous();
  const Tensor rows = strata::randn({tokens, width});
  const Tensor table = strata::zeros({vocab, width});
  for (auto _ : state) benchmark::DoNotOptimize(strata::scatter_add(table, 0, ids, rows));
  state.SetBytesProcessed(state.iterations() * tokens * width * static_cast<int64_t>(sizeof(float) + sizeof(int64_t)));
}

// --- (3) per-op overhead on 16 elements ---

// On a GPU ops are queued: a batch of them is timed up to a synchronisation, so the figure is the host cost of
// issuing one op (the GPU runs them meanwhile), with the wait for the last one spread over the batch.
constexpr int kGpuBatch = 256;

template <typename Op>
void tiny(benchmark::State& state, Device device, Op op) {
  if (!device.is_cpu() && !have_gpu(state)) return;
  const Operands x(kTiny, device);
  const int batch = device.is_cpu() ? 1 : kGpuBatch;
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(op(x));
    if (!device.is_cpu()) strata::synchronize(device);
  }
  // Seconds per op (printed with an SI prefix: "150n" is 150 ns).
  state.counters["per_op"] =
      benchmark::Counter(batch, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

Tensor tiny_add(const Operands& x) { return strata::add(x.a, x.b); }
Tensor tiny_add_scalar(const Operands& x) { return x.a + 2.0; }
Tensor tiny_exp(const Operands& x) { return strata::exp(x.a); }
Tensor tiny_empty(const Operands& x) { return strata::empty({kTiny}, x.a.device()); }
/// The add kernel alone, into existing memory: what an op costs beyond allocating its result.
Tensor tiny_add_kernel(const Operands& x) {
  static const strata::ops::KernelSlot<strata::ops::AddFn> slot("add");
  const Device device = x.a.device();
  slot.get(device)(strata::detail::op_call("add", device), x.c.view(), x.a.view(), x.b.view(), 1);
  return x.c;
}
Tensor tiny_add_in_place(const Operands& x) {
  Tensor c = x.c;
  return strata::add_(c, x.b);
}

/// An op whose kernel registers a device-side assert site and takes its stream's error slot at every launch.
void tiny_index_select(benchmark::State& state, Device device) {
  if (!device.is_cpu() && !have_gpu(state)) return;
  const Tensor index = strata::tensor<int64_t>({3, 0, 15, 7}).to(device);
  tiny(state, device, [&index](const Operands& x) { return strata::index_select(x.a, 0, index); });
}

void current_stream(benchmark::State& state, Device device) {
  if (!device.is_cpu() && !have_gpu(state)) return;
  for (auto _ : state) benchmark::DoNotOptimize(strata::current_stream(device).native());
}

void BM_TinyEmpty(benchmark::State& state) { tiny(state, strata::kCPU, tiny_empty); }
void BM_TinyAdd(benchmark::State& state) { tiny(state, strata::kCPU, tiny_add); }
void BM_TinyAddKernel(benchmark::State& state) { tiny(state, strata::kCPU, tiny_add_kernel); }
void BM_TinyAddInPlace(benchmark::State& state) { tiny(state, strata::kCPU, tiny_add_in_place); }
void BM_TinyAddScalar(benchmark::State& state) { tiny(state, strata::kCPU, tiny_add_scalar); }
void BM_TinyExp(benchmark::State& state) { tiny(state, strata::kCPU, tiny_exp); }
void BM_TinyIndexSelect(benchmark::State& state) { tiny_index_select(state, strata::kCPU); }
void BM_CurrentStream(benchmark::State& state) { current_stream(state, strata::kCPU); }
void BM_CudaTinyEmpty(benchmark::State& state) { tiny(state, kGpu, tiny_empty); }
void BM_CudaTinyAdd(benchmark::State& state) { tiny(state, kGpu, tiny_add); }
void BM_CudaTinyAddKernel(benchmark::State& state) { tiny(state, kGpu, tiny_add_kernel); }
void BM_CudaTinyAddScalar(benchmark::State& state) { tiny(state, kGpu, tiny_add_scalar); }
void BM_CudaTinyIndexSelect(benchmark::State& state) { tiny_index_select(state, kGpu); }
void BM_CudaCurrentStream(benchmark::State& state) { current_stream(state, kGpu); }

BENCHMARK(BM_PlainLoop)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlainLoopOpenMP)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlainLoopOpenMPOnTensors)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AddKernelInto)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AddInPlace)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Add)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CudaAddKernelInto)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaAdd)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Gelu)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GeluBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GeluTanh)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GeluTanhBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Erf)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sin)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cos)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Exp)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(embedding_gradient)->Args({768, 128})->Args({16384, 384})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TinyEmpty)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_TinyAdd)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_TinyAddKernel)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_TinyAddInPlace)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_TinyAddScalar)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_TinyExp)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_TinyIndexSelect)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_CurrentStream)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_CudaTinyEmpty)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaTinyAdd)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaTinyAddKernel)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaTinyAddScalar)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaTinyIndexSelect)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaCurrentStream)->Unit(benchmark::kNanosecond);

}  // namespace
