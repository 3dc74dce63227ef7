// strata::jit on the CPU: CUDA-dialect kernels compiled at run time by the host compiler.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include "strata/jit/jit.h"
#include "strata/strata.h"

namespace strata {
namespace {

using jit::Dim3;
using jit::RawKernel;

// Each test compiles into a cache folder of its own, so that it sees compiles and hits of its own.
class Jit : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/strata-jit-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    folder_ = pattern;
    const char* old = std::getenv("STRATA_KERNEL_CACHE");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("STRATA_KERNEL_CACHE", folder_.c_str(), 1);
  }
  void TearDown() override {
    if (had_) {
      setenv("STRATA_KERNEL_CACHE", old_.c_str(), 1);
    } else {
      unsetenv("STRATA_KERNEL_CACHE");
    }
    std::filesystem::remove_all(folder_);
  }
  std::filesystem::path folder_;
  bool had_ = false;
  std::string old_;
};

constexpr const char* kAdd = R"(
extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
)";

std::vector<float> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return {c.data<float>(), c.data<float>() + c.numel()};
}

float max_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = values(a), y = values(b);
  EXPECT_EQ(x.size(), y.size());
  float worst = 0.0f;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

TEST_F(Jit, VectorAddGivesTheBuiltInAddsResult) {
  const int64_t n = 100003;
  const Tensor a = randn({n}), b = randn({n});
  Tensor c = empty({n});
  RawKernel add(kAdd, "add");
  add({static_cast<unsigned>((n + 255) / 256)}, {256}, {a, b, c, n});
  EXPECT_EQ(values(c), values(a + b));
}

TEST_F(Jit, BlockReductionThroughSharedMemoryAndBarriers) {
  RawKernel sum(R"(
extern "C" __global__ void block_sum(const double* x, double* total, long long n) {
  __shared__ double partial[256];
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : 0.0;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, partial[0]);
}
)",
                "block_sum");
  const int64_t n = 50000;
  const Tensor x = arange(0, n, 1, TensorOptions().dtype(DType::F64));
  Tensor total = zeros({1}, TensorOptions().dtype(DType::F64));
  sum({static_cast<unsigned>((n + 255) / 256)}, {256}, {x, total, n});
  EXPECT_EQ(total.data<double>()[0], static_cast<double>(n) * (n - 1) / 2);
}

TEST_F(Jit, ThreadsReallyMeetAtTheBarrier) {
  // Thread 0 reads, after the barrier, what the last thread wrote before it; a loop over threads would read 0.
  RawKernel k(R"(
extern "C" __global__ void meet(int* out) {
  __shared__ int last;
  if (threadIdx.x == blockDim.x - 1) last = 1000 + blockIdx.x;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = last;
}
)",
              "meet");
  Tensor out = zeros({8}, TensorOptions().dtype(DType::I32));
  k({8}, {100}, {out});
  for (int b = 0; b < 8; ++b) EXPECT_EQ(out.data<int32_t>()[b], 1000 + b);
}

TEST_F(Jit, TiledMatrixProductWithTwoSharedTiles) {
  RawKernel mm(R"(
#define TILE 16
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    int ka = t * TILE + threadIdx.x, kb = t * TILE + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = row < M && ka < K ? A[row * K + ka] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = kb < K && col < N ? B[kb * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
)",
               "matmul");
  const int M = 37, N = 45, K = 29;
  const Tensor a = randn({M, K}), b = randn({K, N});
  Tensor c = empty({M, N});
  mm({(N + 15) / 16, (M + 15) / 16}, {16, 16}, {a, b, c, M, N, K});
  EXPECT_LT(max_difference(c, matmul(a, b)), 1e-4f);
}

TEST_F(Jit, DynamicSharedMemoryHasTheSizeGivenAtLaunch) {
  RawKernel reverse(R"(
extern "C" __global__ void reverse(const float* x, float* y) {
  extern __shared__ float buffer[];
  unsigned base = blockIdx.x * blockDim.x;
  buffer[threadIdx.x] = x[base + threadIdx.x];
  __syncthreads();
  y[base + threadIdx.x] = buffer[blockDim.x - 1 - threadIdx.x];
}
)",
                    "reverse");
  const Tensor x = arange(0, 300, 1, TensorOptions().dtype(DType::F32));
  Tensor y = empty({300});
  reverse({3}, {100}, {x, y}, 100 * sizeof(float));
  for (int i = 0; i < 300; ++i) EXPECT_EQ(y.data<float>()[i], static_cast<float>(i / 100 * 100 + 99 - i % 100));
}

TEST_F(Jit, AtomicsOnEveryTypeFromManyBlocks) {
  RawKernel k(R"(
extern "C" __global__ void hammer(int* i32, long long* i64, float* f32, double* f64, int* imax, float* fmin,
                                  double* dmax, int* cas_winner, long long* cas64) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(i32, 1);
  atomicAdd(i64, 3LL);
  atomicAdd(f32, 0.5f);
  atomicAdd(f64, 0.25);
  atomicMax(imax, t);
  atomicMin(fmin, -1.0f * t);
  atomicMax(dmax, 2.0 * t);
  atomicCAS(cas_winner, -1, t);
  atomicCAS(cas64, 0LL, 7LL);
}
)",
              "hammer");
  const auto i32 = TensorOptions().dtype(DType::I32), i64 = TensorOptions().dtype(DType::I64),
             f64 = TensorOptions().dtype(DType::F64);
  Tensor a = zeros({1}, i32), b = zeros({1}, i64), c = zeros({1}), d = zeros({1}, f64), e = zeros({1}, i32),
         f = zeros({1}), g = zeros({1}, f64), h = full({1}, -1, i32), j = zeros({1}, i64);
  k({64}, {128}, {a, b, c, d, e, f, g, h, j});
  const int threads = 64 * 128;
  EXPECT_EQ(a.data<int32_t>()[0], threads);
  EXPECT_EQ(b.data<int64_t>()[0], 3LL * threads);
  EXPECT_EQ(c.data<float>()[0], 0.5f * threads);  // exact: every partial sum is a multiple of 0.5 below 2^24
  EXPECT_EQ(d.data<double>()[0], 0.25 * threads);
  EXPECT_EQ(e.data<int32_t>()[0], threads - 1);
  EXPECT_EQ(f.data<float>()[0], -1.0f * (threads - 1));
  EXPECT_EQ(g.data<double>()[0], 2.0 * (threads - 1));
  EXPECT_GE(h.data<int32_t>()[0], 0);  // exactly one thread won, whichever
  EXPECT_EQ(j.data<int64_t>()[0], 7);
}

TEST_F(Jit, DeviceFunctionsMathAndTwoDimensionalBlocks) {
  RawKernel k(R"(
__device__ float softplus(float x) { return logf(1.0f + expf(x)); }
extern "C" __global__ void f(const float* x, float* y, int rows, int cols) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows && c < cols) y[r * cols + c] = softplus(x[r * cols + c]) + sqrtf(fabsf(x[r * cols + c]));
}
)",
              "f");
  const Tensor x = randn({19, 23});
  Tensor y = empty({19, 23});
  k({3, 3}, {8, 8}, {x, y, 19, 23});
  EXPECT_LT(max_difference(y, log(exp(x) + 1.0) + sqrt(abs(x))), 1e-5f);
}

TEST_F(Jit, AFailedAssertNamesTheKernelTheLineAndTheCondition) {
  RawKernel k(R"(extern "C" __global__ void check(const int* idx, int* out, int n) {
  int i = threadIdx.x;
  assert(idx[i] < n);
  out[i] = idx[i];
}
)",
              "check");
  const Tensor idx = arange(0, 8, 1, TensorOptions().dtype(DType::I32));
  Tensor out = zeros({8}, TensorOptions().dtype(DType::I32));
  k({1}, {8}, {idx, out, 8});  // every index in range: no error
  try {
    k({1}, {8}, {idx, out, 5});
    FAIL() << "expected DeviceAssertError";
  } catch (const DeviceAssertError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("kernel 'check'"), std::string::npos) << m;
    EXPECT_NE(m.find("check.cu:3"), std::string::npos) << m;
    EXPECT_NE(m.find("idx[i] < n"), std::string::npos) << m;
  }
}

TEST_F(Jit, ACompileErrorCarriesTheCompilersLogWithTheUsersLine) {
  RawKernel k("extern \"C\" __global__ void broken(float* x) {\n  x[0] = undefined_name;\n}\n", "broken");
  try {
    k.compile_for(kCPU);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("broken.cu:2"), std::string::npos) << m;
    EXPECT_NE(m.find("undefined_name"), std::string::npos) << m;
  }
}

TEST_F(Jit, WrongArgumentsGetErrorsThatNameTheArgument) {
  RawKernel add(kAdd, "add");
  const Tensor a = ones({4}), b = ones({4});
  Tensor c = empty({4});
  EXPECT_THROW(
      {
        try {
          add({1}, {4}, {a, b, c});
        } catch (const InvalidArgumentError& e) {
          EXPECT_NE(std::string(e.what()).find("add(const float* a, const float* b, float* c, int n)"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      InvalidArgumentError);
  EXPECT_THROW(add({1}, {4}, {a, ones({4}, TensorOptions().dtype(DType::F64)), c, 4}), DTypeError);
  EXPECT_THROW(add({1}, {4}, {a, b, 3.0, 4}), InvalidArgumentError);                           // a number for a pointer
  EXPECT_THROW(add({1}, {4}, {a, b, c, 2.5}), InvalidArgumentError);                           // a fraction for an int
  EXPECT_THROW(add({1}, {4}, {a, b, c, int64_t{1} << 40}), InvalidArgumentError);              // too large for int
  EXPECT_THROW(add({1}, {4}, {a, ones({4, 2}).transpose(0, 1), c, 4}), InvalidArgumentError);  // not contiguous
  EXPECT_THROW(add({1}, {2048}, {a, b, c, 4}), InvalidArgumentError);                          // block too large
  EXPECT_THROW(add({0}, {4}, {a, b, c, 4}), InvalidArgumentError);                             // empty grid
  try {
    RawKernel missing(kAdd, "ad");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("it defines: add"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RawKernel(kAdd, "add", {"--no-such-option"}).compile_for(kCPU), InvalidArgumentError);
}

TEST_F(Jit, ABarrierOutsideAKernelIsRefusedOnTheCpuWithItsLine) {
  RawKernel k(R"(
__device__ void helper() { __syncthreads(); }
extern "C" __global__ void k(float* x) { helper(); }
)",
              "k");
  try {
    k.compile_for(kCPU);
    FAIL();
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

TEST_F(Jit, TheSecondCompileOfASourceIsACacheHitAndACorruptEntryIsRebuilt) {
  const jit::CacheStats before = jit::cache_stats();
  jit::Compiled first = jit::compile(kAdd, jit::Target::parse("cpu"));
  EXPECT_FALSE(first.from_cache);
  ASSERT_GE(first.binary.size(), 4u);
  EXPECT_EQ(first.binary.substr(0, 4),
            "\x7f"
            "ELF");
  jit::Compiled second = jit::compile(kAdd, jit::Target::parse("cpu"));
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(jit::cache_stats().hits - before.hits, 1);
  EXPECT_EQ(jit::cache_stats().misses - before.misses, 1);
  // Corrupt the entry: the next compile removes it, compiles again, and the kernel runs.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(folder_)) {
    if (e.path().extension() == ".so") {
      // A new file, as a crash or a full disk would leave it: the loaded module's file is never written in place.
      std::filesystem::remove(e.path());
      std::ofstream(e.path()) << "not a shared object";
      ++entries;
    }
  }
  EXPECT_EQ(entries, 1);
  const jit::CacheStats middle = jit::cache_stats();
  jit::Compiled third = jit::compile(kAdd, jit::Target::parse("cpu"));
  EXPECT_FALSE(third.from_cache);
  EXPECT_EQ(jit::cache_stats().discarded - middle.discarded, 1);
  EXPECT_TRUE(
      third.binary.starts_with("\x7f"
                               "ELF"));  // (not EXPECT_EQ: a failure would print the whole object)
  RawKernel add(kAdd, "add");
  const Tensor a = ones({4}), b = ones({4});
  Tensor c = empty({4});
  add({1}, {4}, {a, b, c, 4});
  EXPECT_EQ(values(c), std::vector<float>(4, 2.0f));
}

TEST_F(Jit, AnUnwritableCacheFolderCompilesWithoutTheCache) {
  setenv("STRATA_KERNEL_CACHE", "/proc/strata-cannot-be-here", 1);
  RawKernel add(kAdd, "add");
  const Tensor a = ones({4}), b = ones({4});
  Tensor c = empty({4});
  add({1}, {4}, {a, b, c, 4});
  EXPECT_EQ(values(c), std::vector<float>(4, 2.0f));
}

TEST_F(Jit, AKernelWithoutTheDiskCacheCompilesAndLeavesNoEntry) {
  const jit::CacheStats before = jit::cache_stats();
  RawKernel add(kAdd, "add", {}, /*disk_cache=*/false);
  const Tensor a = ones({4}), b = ones({4});
  Tensor c = empty({4});
  add({1}, {4}, {a, b, c, 4});
  EXPECT_EQ(values(c), std::vector<float>(4, 2.0f));
  EXPECT_EQ(jit::cache_stats().misses - before.misses, 1);
  EXPECT_TRUE(!std::filesystem::exists(folder_) || std::filesystem::is_empty(folder_));
}

TEST_F(Jit, TargetsParseAndUnknownOnesAreRefused) {
  EXPECT_EQ(jit::Target::parse("cuda:sm_90").arch, "sm_90");
  EXPECT_EQ(jit::Target::parse("hip:gfx90a").type, DeviceType::HIP);
  EXPECT_THROW(jit::Target::parse("cuda"), InvalidArgumentError);
  EXPECT_THROW(jit::Target::parse("tpu:v5"), InvalidArgumentError);
}

TEST_F(Jit, ATensorWrittenByAKernelHasANewVersion) {
  RawKernel add(kAdd, "add");
  const Tensor a = ones({4}), b = ones({4});
  Tensor c = empty({4});
  const uint64_t a_before = a.version(), c_before = c.version();
  add({1}, {4}, {a, b, c, 4});
  EXPECT_EQ(a.version(), a_before);
  EXPECT_GT(c.version(), c_before);
}

}  // namespace
}  // namespace strata
