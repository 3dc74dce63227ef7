// sgemm throughput: strata::matmul next to raw OpenBLAS cblas_sgemm and raw oneDNN dnnl_sgemm on the same data,
// and strata::matmul on a GPU when one is available.
//
// OpenBLAS picks its kernels once, when it is loaded: OPENBLAS_CORETYPE=Haswell (set on some machines) holds it
// to AVX2 even on AVX-512 CPUs. Compare `env -u OPENBLAS_CORETYPE bin/matmul_bench` with a run where it is set.

#include <benchmark/benchmark.h>
#include <cblas.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "strata/runtime/cuda.h"
#include "strata/runtime/parallel.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace {

using strata::Tensor;

// libstrata links OpenBLAS and oneDNN privately; the raw functions are those it loaded, found by name (oneDNN is
// optional: builds without it skip its benchmark).
template <typename Fn>
Fn* loaded_function(const char* name) {
  return reinterpret_cast<Fn*>(dlsym(RTLD_DEFAULT, name));
}

// dnnl_sgemm as oneDNN's dnnl.h declares it (row-major; returns dnnl_status_t).
using DnnlSgemm = int(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                      int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

double flops(int64_t n) { return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n); }

void set_rate(benchmark::State& state, int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops(n) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  state.SetLabel(std::string("OPENBLAS_CORETYPE=") + (coretype != nullptr ? coretype : "(unset)"));
}

struct Operands {
  explicit Operands(int64_t n, strata::Device device = strata::kCPU)
      : a(strata::rand({n, n}, strata::TensorOptions().device(device))),
        b(strata::rand({n, n}, strata::TensorOptions().device(device))),
        c(strata::zeros({n, n}, strata::TensorOptions().device(device))) {}
  Tensor a, b, c;
};

void BM_StrataMatmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Operands x(n);
  for (auto _ : state) benchmark::DoNotOptimize(strata::matmul(x.a, x.b).data_ptr());
  set_rate(state, n);
}

// Batched products (bmm): `batch` products of n x n matrices; GFLOP/s over the whole batch.
void BM_StrataBmm(benchmark::State& state) {
  const int64_t batch = state.range(0), n = state.range(1);
  const Tensor a = strata::rand({batch, n, n}), b = strata::rand({batch, n, n});
  for (auto _ : state) benchmark::DoNotOptimize(strata::bmm(a, b).data_ptr());
  state.counters["GFLOP/s"] =
      benchmark::Counter(static_cast<double>(batch) * flops(n) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// OpenBLAS as strata runs it: one thread (Note [One CPU thread pool]), or with its own pool on every core.
void openblas_sgemm(benchmark::State& state, bool own_threads) {
  const int64_t n = state.range(0);
  const Operands x(n);
  const auto sgemm = loaded_function<decltype(cblas_sgemm)>("cblas_sgemm");
  const auto set_threads = loaded_function<void(int)>("openblas_set_num_threads");
  const auto get_parallel = loaded_function<int()>("openblas_get_parallel");
  if (sgemm == nullptr || set_threads == nullptr || get_parallel == nullptr) {
    state.SkipWithError("OpenBLAS is not loaded by libstrata");
    return;
  }
  if (own_threads && get_parallel() != 1) {
    // strata/CMakeLists.txt links the OpenMP build where installed, whose threads are our pool's (and whose thread
    // count is OpenMP's: setting it here would resize our pool); blas_bench in bench/compare-libtorch times the
    // pthread build.
    state.SkipWithError("libstrata loaded an OpenBLAS without threads of its own (not the pthread build)");
    return;
  }
  set_threads(own_threads ? strata::num_threads() : 1);
  const int ni = static_cast<int>(n);
  for (auto _ : state) {
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, x.a.data<float>(), ni, x.b.data<float>(), ni,
          0.0f, x.c.data<float>(), ni);
    benchmark::ClobberMemory();
  }
  set_threads(1);
  // The OpenMP build passes its count on to omp_set_num_threads: give oneDNN's benchmarks, which may run next on
  // this thread (--benchmark_enable_random_interleaving), their threads back.
  strata::set_num_threads(strata::num_threads());
  set_rate(state, n);
}
void BM_OpenBlasSgemm(benchmark::State& state) { openblas_sgemm(state, false); }
void BM_OpenBlasSgemmOwnThreads(benchmark::State& state) { openblas_sgemm(state, true); }

void BM_DnnlSgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Operands x(n);
  const auto sgemm = loaded_function<DnnlSgemm>("dnnl_sgemm");
  if (sgemm == nullptr) {
    state.SkipWithError("oneDNN is not loaded by libstrata (built without it)");
    return;
  }
  strata::num_threads();  // oneDNN runs on the OpenMP pool, sized as strata sizes it
  for (auto _ : state) {
    sgemm('N', 'N', n, n, n, 1.0f, x.a.data<float>(), n, x.b.data<float>(), n, 0.0f, x.c.data<float>(), n);
    benchmark::ClobberMemory();
  }
  set_rate(state, n);
}

// On the GPU each iteration is timed with events around the product (manual time).
void cuda_matmul(benchmark::State& state, strata::DType dtype, bool tf32) {
  if (!strata::cuda::is_available()) {
    state.SkipWithError(("CUDA unavailable: " + strata::cuda::unavailable_reason()).c_str());
    return;
  }
  const int64_t n = state.range(0);
  const strata::Device gpu(strata::DeviceType::CUDA, 0);
  const Operands f32(n, gpu);
  const Tensor a = f32.a.to(dtype), b = f32.b.to(dtype);
  strata::set_allow_tf32(tf32);
  strata::matmul(a, b);  // warm-up: cuBLAS handle and heuristics
  strata::Event start(gpu), end(gpu);
  for (auto _ : state) {
    start.record();
    benchmark::DoNotOptimize(strata::matmul(a, b).data_ptr());
    end.record();
    end.synchronize();
    state.SetIterationTime(end.elapsed_ms_since(start) / 1e3);
  }
  strata::set_allow_tf32(false);
  state.counters["GFLOP/s"] = benchmark::Counter(flops(n) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(strata::cuda::device_name(0));
}
void BM_CudaMatmulF32(benchmark::State& state) { cuda_matmul(state, strata::DType::F32, false); }
void BM_CudaMatmulTF32(benchmark::State& state) { cuda_matmul(state, strata::DType::F32, true); }
void BM_CudaMatmulBF16(benchmark::State& state) { cuda_matmul(state, strata::DType::BF16, false); }

// 16 and 32 show where the CPU backend switches from OpenBLAS to oneDNN (Note [Choosing the CPU GEMM]).
void cpu_sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {16, 32, 64, 128, 256, 512, 1024, 2048}) b->Arg(n);
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}
void gpu_sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {64, 128, 256, 512, 1024, 2048, 4096, 8192}) b->Arg(n);
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_StrataMatmul)->Apply(cpu_sizes);
BENCHMARK(BM_StrataBmm)
    ->Args({256, 16})
    ->Args({64, 64})
    ->Args({16, 128})
    ->Args({4, 512})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DnnlSgemm)->Apply(cpu_sizes);
BENCHMARK(BM_OpenBlasSgemm)->Apply(cpu_sizes);
BENCHMARK(BM_OpenBlasSgemmOwnThreads)->Apply(cpu_sizes);
BENCHMARK(BM_CudaMatmulF32)->Apply(gpu_sizes);
BENCHMARK(BM_CudaMatmulTF32)->Apply(gpu_sizes);
BENCHMARK(BM_CudaMatmulBF16)->Apply(gpu_sizes);

}  // namespace
