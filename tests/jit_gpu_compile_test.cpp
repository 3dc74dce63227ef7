// The GPU half of the run-time compiler (strata/jit/compiler.h, Note [The GPU half of the run-time compiler] in
// backends/cuda/jit_compiler.cpp): NVRTC and hiprtc compile Strata's dialect for a named architecture without a GPU;
// the launch tests run where a CUDA GPU is present.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/jit/compiler.h"
#include "strata/runtime/plugin.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/tensor.h"
#include "test_devices.h"

namespace strata {
namespace {

using jit::CompileRequest;
using jit::DeviceCompiler;

/// Whether this build has the plugin of `type` (the default preset builds both; the cpu preset neither).
bool plugin_built(DeviceType type) {
  for (const auto& folder : plugin_folders()) {
    std::error_code ec;
    if (std::filesystem::exists(folder / plugin_file(type), ec)) return true;
  }
  return false;
}

// Only a missing plugin skips: where the plugin is built, its compiler must start, GPU or not.
#define STRATA_SKIP_WITHOUT_PLUGIN(type)                                                                   \
  do {                                                                                                     \
    if (!plugin_built(type)) GTEST_SKIP() << "this build has no " << plugin_file(type) << " (cpu preset)"; \
  } while (false)

// Every part of the dialect in one module: a __device__ helper, static and dynamic shared memory, a barrier, the
// atomics (those the prelude adds and the vendor's own), math functions and assert.
constexpr const char* kDialectSource = R"(__device__ float square(float x) { return x * x; }

extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

extern "C" __global__ void everything(const float* x, float* f, double* d, int* k, unsigned int* u, long long* ll,
                                      unsigned long long* ull, int n) {
  __shared__ float tile[256];
  extern __shared__ double dynamic[];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  assert(n > 0);
  tile[threadIdx.x] = i < n ? square(x[i]) + sqrtf(fabsf(x[i])) + expf(-x[i]) : 0.0f;
  dynamic[threadIdx.x] = tile[threadIdx.x];
  __syncthreads();
  atomicAdd(&f[0], tile[threadIdx.x]);
  atomicMax(&f[1], tile[threadIdx.x]);
  atomicMin(&f[2], tile[threadIdx.x]);
  atomicAdd(&d[0], dynamic[threadIdx.x]);
  atomicMax(&d[1], dynamic[threadIdx.x]);
  atomicMin(&d[2], dynamic[threadIdx.x]);
  atomicAdd(&k[0], 1);
  atomicMax(&k[1], i);
  atomicMin(&k[2], i);
  atomicCAS(&k[3], 0, 1);
  atomicAdd(&u[0], 1u);
  atomicMax(&u[1], 2u);
  atomicAdd(&ll[0], 1LL << 40);
  atomicMax(&ll[1], static_cast<long long>(i));
  atomicMin(&ll[2], -static_cast<long long>(i));
  atomicCAS(&ll[3], 0LL, 5LL);
  atomicAdd(&ull[0], 1ULL);
  atomicCAS(&ull[1], 0ULL, 7ULL);
}
)";

/// The ELF header's e_machine: EM_CUDA (190) for a cubin, EM_AMDGPU (224) for an AMD code object.
int elf_machine(const std::string& binary) {
  if (binary.size() < 20 || binary.compare(0, 4,
                                           "\x7f"
                                           "ELF") != 0)
    return -1;
  std::uint16_t machine = 0;
  std::memcpy(&machine, binary.data() + 18, sizeof(machine));  // little-endian, as the hosts we build for
  return machine;
}

CompileRequest request(std::string source, std::string arch, std::string file_name = "kernels.cu",
                       std::vector<std::string> options = {}) {
  return CompileRequest{std::move(source), std::move(file_name), std::move(options), std::move(arch)};
}

/// The error's message, or "" when `compile` did not throw E.
template <typename E>
std::string error_of(const DeviceCompiler& compiler, const CompileRequest& req) {
  try {
    compiler.compile(req);
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

constexpr const char* kBroken =
    "extern \"C\" __global__ void broken(float* x) {\n"
    "  x[0] = 1.0f;\n"
    "  x[1] = undeclared_name;\n"
    "}\n";

// --- without a GPU -------------------------------------------------------------------------------------------------

TEST(JitGpuCompiler, CpuHasNoDeviceCompiler) {
  EXPECT_THROW(jit::device_compiler(DeviceType::CPU), InvalidArgumentError);
}

TEST(JitGpuCompiler, NvrtcCompilesTheDialectToACubinForSm90) {
  STRATA_SKIP_WITHOUT_PLUGIN(DeviceType::CUDA);
  const DeviceCompiler& nvrtc = jit::device_compiler(DeviceType::CUDA);
  EXPECT_EQ(&nvrtc, &jit::device_compiler(DeviceType::CUDA));  // one per device type
  const auto result = nvrtc.compile(request(kDialectSource, "sm_90"));
  EXPECT_EQ(elf_machine(result.binary), 190) << "not a cubin: " << result.binary.size() << " bytes";
  // The kernels are there by their extern "C" names, and the assert record's global with them.
  for (const char* name : {"vector_add", "everything", "strata_jit_assert_record"})
    EXPECT_NE(result.binary.find(name), std::string::npos) << name;
}

TEST(JitGpuCompiler, HiprtcCompilesTheDialectToACodeObjectForGfx90a) {
  STRATA_SKIP_WITHOUT_PLUGIN(DeviceType::HIP);
  const DeviceCompiler& hiprtc = jit::device_compiler(DeviceType::HIP);
  const auto result = hiprtc.compile(request(kDialectSource, "gfx90a"));
  EXPECT_EQ(elf_machine(result.binary), 224) << "not an AMD GPU code object: " << result.binary.size() << " bytes";
  for (const char* name : {"vector_add", "everything", "strata_jit_assert_record"})
    EXPECT_NE(result.binary.find(name), std::string::npos) << name;
}

TEST(JitGpuCompiler, IdentityNamesTheCompilerItsVersionAndTheDialect) {
  STRATA_SKIP_WITHOUT_PLUGIN(DeviceType::CUDA);
  const std::string nvrtc = jit::device_compiler(DeviceType::CUDA).identity();
  EXPECT_EQ(nvrtc.rfind("NVRTC ", 0), 0u) << nvrtc;
  EXPECT_NE(nvrtc.find("Strata GPU dialect"), std::string::npos) << nvrtc;
  if (plugin_built(DeviceType::HIP)) {
    const std::string hiprtc = jit::device_compiler(DeviceType::HIP).identity();
    EXPECT_EQ(hiprtc.rfind("hiprtc ", 0), 0u) << hiprtc;
    EXPECT_NE(hiprtc.find("Strata GPU dialect"), std::string::npos) << hiprtc;
  }
}

TEST(JitGpuCompiler, SyntaxErrorNamesTheFileAndTheUsersLine) {
  STRATA_SKIP_WITHOUT_PLUGIN(DeviceType::CUDA);
  // NVRTC writes file(line), clang file:line:column; line 3 of the user's text, whatever the prelude's length.
  const std::string nvrtc =
      error_of<CompileError>(jit::device_compiler(DeviceType::CUDA), request(kBroken, "sm_90", "broken.cu"));
  EXPECT_NE(nvrtc.find("broken.cu(3)"), std::string::npos) << nvrtc;
  EXPECT_NE(nvrtc.find("undeclared_name"), std::string::npos) << nvrtc;
  if (plugin_built(DeviceType::HIP)) {
    const std::string hiprtc =
        error_of<CompileError>(jit::device_compiler(DeviceType::HIP), request(kBroken, "gfx90a", "broken.cu"));
    EXPECT_NE(hiprtc.find("broken.cu:3:"), std::string::npos) << hiprtc;
    EXPECT_NE(hiprtc.find("undeclared_name"), std::string::npos) << hiprtc;
  }
}

TEST(JitGpuCompiler, UserOptionsReachTheCompiler) {
  STRATA_SKIP_WITHOUT_PLUGIN(DeviceType::CUDA);
  const std::string source = "#if N != 4\n#error N must be 4\n#endif\nextern \"C\" __global__ void k(float* x) {}\n";
  const DeviceCompiler& nvrtc = jit::device_compiler(DeviceType::CUDA);
  EXPECT_NO_THROW(nvrtc.compile(request(source, "sm_90", "n.cu", {"-DN=4", "--use_fast_math"})));
  EXPECT_NE(error_of<CompileError>(nvrtc, request(source, "sm_90", "n.cu", {"-DN=5"})).find("N must be 4"),
            std::string::npos);
  if (plugin_built(DeviceType::HIP)) {
    const DeviceCompiler& hiprtc = jit::device_compiler(DeviceType::HIP);
    EXPECT_NO_THROW(hiprtc.compile(request(source, "gfx90a", "n.cu", {"-DN=4"})));
    EXPECT_NE(error_of<CompileError>(hiprtc, request(source, "gfx90a", "n.cu", {"-DN=5"})).find("N must be 4"),
              std::string::npos);
  }
}

TEST(JitGpuCompiler, AKernelsOwnAtomicOverloadsWinOverThePreludes) {
  STRATA_SKIP_WITHOUT_PLUGIN(DeviceType::CUDA);
  // CUDA sources often carry their own float atomicMax or long long atomicAdd; with the prelude's they still compile
  // (HIP's own headers define a float atomicMax, so there such a kernel does not compile, prelude or not).
  const std::string source = R"(__device__ float atomicMax(float* address, float val) {
  int* bits = (int*)address;
  int old = *bits, assumed;
  do {
    assumed = old;
    old = atomicCAS(bits, assumed, __float_as_int(fmaxf(val, __int_as_float(assumed))));
  } while (assumed != old);
  return __int_as_float(old);
}
__device__ long long atomicAdd(long long* address, long long val) {
  return (long long)atomicAdd((unsigned long long*)address, (unsigned long long)val);
}
extern "C" __global__ void k(float* f, double* d, long long* l) {
  atomicMax(f, 1.0f);
  atomicMax(d, 1.0);
  atomicAdd(l, 1LL);
  atomicMax(l, 2LL);
}
)";
  EXPECT_EQ(elf_machine(jit::device_compiler(DeviceType::CUDA).compile(request(source, "sm_90")).binary), 190);
}

TEST(JitGpuCompiler, UnknownArchitectureIsAClearError) {
  STRATA_SKIP_WITHOUT_PLUGIN(DeviceType::CUDA);
  const DeviceCompiler& nvrtc = jit::device_compiler(DeviceType::CUDA);
  for (const char* arch : {"gfx90a", "sm_", "sm_9x", "sm_20", ""}) {
    const std::string message = error_of<InvalidArgumentError>(nvrtc, request(kDialectSource, arch));
    EXPECT_NE(message.find(fmt::format("unknown architecture '{}'", arch)), std::string::npos)
        << arch << ": " << message;
    EXPECT_NE(message.find("sm_90"), std::string::npos) << "lists what it knows: " << message;
  }
  if (plugin_built(DeviceType::HIP)) {
    const DeviceCompiler& hiprtc = jit::device_compiler(DeviceType::HIP);
    // An architecture hiprtc does not know would crash the process inside it: the plugin refuses it first.
    for (const char* arch : {"sm_90", "gfx9999", "gfx90a:turbo+", ""}) {
      const std::string message = error_of<InvalidArgumentError>(hiprtc, request(kDialectSource, arch));
      EXPECT_NE(message.find(fmt::format("unknown architecture '{}'", arch)), std::string::npos)
          << arch << ": " << message;
    }
    EXPECT_EQ(elf_machine(hiprtc.compile(request(kDialectSource, "gfx90a:xnack-")).binary), 224);
  }
}

TEST(JitGpuCompiler, ArchitectureNewerThanNvrtcGetsPtx) {
  STRATA_SKIP_WITHOUT_PLUGIN(DeviceType::CUDA);
  const auto result = jit::device_compiler(DeviceType::CUDA).compile(request(kDialectSource, "sm_999"));
  EXPECT_EQ(elf_machine(result.binary), -1);
  EXPECT_NE(result.binary.find(".visible .entry vector_add"), std::string::npos) << result.binary.substr(0, 400);
  EXPECT_NE(result.log.find("does not know sm_999"), std::string::npos) << result.log;
  EXPECT_EQ(result.binary.find('\0'), std::string::npos);  // the driver is given it with c_str()
}

// --- on a CUDA GPU -------------------------------------------------------------------------------------------------

void* address_of(const Tensor& t) { return t.data_ptr(); }

TEST(JitGpuLaunch, VectorAddOnCuda0) {
  STRATA_SKIP_WITHOUT_CUDA();  // device_count(CUDA) == 0, in the words scripts/gpu-check looks for
  const Device gpu(DeviceType::CUDA, 0);
  const DeviceCompiler& nvrtc = jit::device_compiler(DeviceType::CUDA);
  const std::string arch = nvrtc.device_arch(0);
  EXPECT_EQ(arch.rfind("sm_", 0), 0u) << arch;
  EXPECT_GE(nvrtc.max_shared_bytes(0), 48u * 1024);
  EXPECT_GE(nvrtc.max_block_threads(0), 1024);
  auto module = nvrtc.load(0, nvrtc.compile(request(kDialectSource, arch)).binary);

  const int n = 1000;
  std::vector<float> a(n), b(n), expected(n);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.5f * static_cast<float>(i);
    b[i] = 3.0f - static_cast<float>(i);
    expected[i] = a[i] + b[i];
  }
  const Tensor ta = tensor(a, {n}, gpu), tb = tensor(b, {n}, gpu);
  const Tensor out = zeros({n}, TensorOptions(DType::F32).device(gpu));
  void* pa = address_of(ta);
  void* pb = address_of(tb);
  void* pout = address_of(out);
  int count = n;
  void* args[] = {&pa, &pb, &pout, &count};
  module->launch("vector_add", {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, current_stream(gpu).native(), args);
  EXPECT_EQ(out.to(kCPU).to_vector<float>(), expected);
  EXPECT_FALSE(module->take_assert_failure().has_value());

  try {
    module->launch("no_such_kernel", {1, 1, 1}, {1, 1, 1}, 0, nullptr, args);
    ADD_FAILURE() << "launched a kernel the module does not have";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("'no_such_kernel' on cuda:0"), std::string::npos) << e.what();
  }
}

constexpr const char* kReduceSource = R"(extern "C" __global__ void block_sum(const float* x, float* sums, int n) {
  extern __shared__ float partial[];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

extern "C" __global__ void block_sum_static(const double* x, double* total, long long* count, double* top, int n) {
  __shared__ double partial[BLOCK];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : 0.0;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(total, partial[0]);
    atomicAdd(count, 1LL << 33);
  }
  if (i < n) atomicMax(top, x[i]);
}
)";

TEST(JitGpuLaunch, BlockReductionWithSharedMemoryOnCuda0) {
  STRATA_SKIP_WITHOUT_CUDA();
  const Device gpu(DeviceType::CUDA, 0);
  const DeviceCompiler& nvrtc = jit::device_compiler(DeviceType::CUDA);
  auto module =
      nvrtc.load(0, nvrtc.compile(request(kReduceSource, nvrtc.device_arch(0), "reduce.cu", {"-DBLOCK=512"})).binary);

  // Dynamic shared memory: 1024 threads with 4 KiB, then 256 threads with 64 KiB, over the 48 KiB a kernel may use
  // without asking (the launch sets the kernel's attribute), where the GPU has that much.
  const int n = 100000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  const Tensor tx = tensor(x, {n}, gpu);
  const auto expect_block_sums = [&](unsigned threads, int count, std::size_t shared) {
    const unsigned blocks = (static_cast<unsigned>(count) + threads - 1) / threads;
    const Tensor sums = zeros({static_cast<int64_t>(blocks)}, TensorOptions(DType::F32).device(gpu));
    void* px = address_of(tx);
    void* ps = address_of(sums);
    void* args[] = {&px, &ps, &count};
    module->launch("block_sum", {blocks, 1, 1}, {threads, 1, 1}, shared, current_stream(gpu).native(), args);
    const auto got = sums.to(kCPU).to_vector<float>();
    for (unsigned b = 0; b < blocks; ++b) {
      float want = 0;  // small integers: exact in any order
      for (unsigned i = b * threads; i < std::min<unsigned>((b + 1) * threads, count); ++i) want += x[i];
      ASSERT_EQ(got[b], want) << "block " << b << " of " << threads << " threads, " << shared << " bytes shared";
    }
  };
  expect_block_sums(1024, n, 1024 * sizeof(float));
  if (nvrtc.max_shared_bytes(0) >= 64 * 1024) expect_block_sums(256, 256 * 4, 64 * 1024);

  // Static shared memory sized by a user's -D, double atomics, and the long long atomicAdd of the prelude.
  std::vector<double> xd(n);
  for (int i = 0; i < n; ++i) xd[i] = static_cast<double>(i % 11);
  const Tensor txd = tensor(xd, {n}, gpu);
  const Tensor total = zeros({1}, TensorOptions(DType::F64).device(gpu));
  const Tensor count = zeros({1}, TensorOptions(DType::I64).device(gpu));
  const Tensor top = full({1}, -1.0, TensorOptions(DType::F64).device(gpu));
  void* p[] = {address_of(txd), address_of(total), address_of(count), address_of(top)};
  int size = n;
  void* args[] = {&p[0], &p[1], &p[2], &p[3], &size};
  const unsigned blocks = (n + 511) / 512;
  module->launch("block_sum_static", {blocks, 1, 1}, {512, 1, 1}, 0, nullptr, args);
  double want = 0;
  for (double v : xd) want += v;
  EXPECT_EQ(total.to(kCPU).to_vector<double>()[0], want);
  EXPECT_EQ(count.to(kCPU).to_vector<int64_t>()[0], static_cast<int64_t>(blocks) << 33);
  EXPECT_EQ(top.to(kCPU).to_vector<double>()[0], 10.0);
}

/// Runs a kernel whose assert fails on cuda:0, then exits 0 when the module's record says what failed (printed to
/// stderr) and is given only once, 1 otherwise.
[[noreturn]] void run_failing_assert() {
  const Device gpu(DeviceType::CUDA, 0);
  const DeviceCompiler& nvrtc = jit::device_compiler(DeviceType::CUDA);
  const std::string source =
      "extern \"C\" __global__ void checked(const int* x) {\n"
      "  // line 2\n"
      "  assert(x[threadIdx.x] < 3);\n"
      "}\n";
  auto module = nvrtc.load(0, nvrtc.compile(request(source, nvrtc.device_arch(0), "checked.cu")).binary);
  const Tensor x = tensor(std::vector<std::int32_t>{0, 1, 2, 3, 4}, {5}, gpu);
  void* px = address_of(x);
  void* args[] = {&px};
  module->launch("checked", {1, 1, 1}, {5, 1, 1}, 0, nullptr, args);
  try {
    synchronize(gpu);
    std::fprintf(stderr, "the synchronisation succeeded after a trap\n");
  } catch (const Error& e) {
    std::fprintf(stderr, "synchronising: %s\n", e.what());
  }
  const auto failure = module->take_assert_failure();
  if (failure) {
    std::fprintf(stderr, "kernel '%s' line %d of %s: assertion `%s` failed\n", failure->function.c_str(), failure->line,
                 failure->file.c_str(), failure->condition.c_str());
  }
  std::_Exit(failure && !module->take_assert_failure() ? 0 : 1);
}

// A failed assert traps, which loses the CUDA context of the whole process: the test runs in a child process (a
// threadsafe death test re-executes the binary for this one test) and reports through its exit status and stderr.
TEST(JitGpuLaunch, AssertRecordsTheLineAndConditionThenTraps) {
  STRATA_SKIP_WITHOUT_CUDA();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_failing_assert(), ::testing::ExitedWithCode(0),
              "kernel 'checked' line 3 of checked.cu: assertion `x\\[threadIdx.x\\] < 3` failed");
}

}  // namespace
}  // namespace strata
