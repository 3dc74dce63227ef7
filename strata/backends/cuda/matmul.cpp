// The CUDA GEMM (Note [One batched GEMM] in ops/matmul_kernels.h) on cuBLAS: one strided-batched call per product.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <limits>
#include <vector>

#include "strata/backends/cuda/cuda_check.h"
#include "strata/backends/cuda/library_handles.h"
#include "strata/backends/cuda/library_memory.h"
#include "strata/core/error.h"
#include "strata/ops/matmul_kernels.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/plugin.h"

namespace strata::cuda {

namespace {

bool cublas_failed_to_allocate(cublasStatus_t status) {
  if (status != CUBLAS_STATUS_ALLOC_FAILED) return false;
  (void)cudaGetLastError();  // left by cuBLAS's failed cudaMalloc; the retry must not inherit it
  return true;
}

[[noreturn]] void throw_cublas(cublasStatus_t status, const char* call, const char* op, int device) {
  // Whatever CUDA error the call left must not be reported again by a later, unrelated launch.
  (void)cudaGetLastError();
  if (status == CUBLAS_STATUS_ALLOC_FAILED) {
    throw_library_out_of_memory(op, "cuBLAS", call, cublasGetStatusName(status), Device(DeviceType::CUDA, device));
  }
  STRATA_THROW(BackendError, "{}: {} failed on cuda:{}: {} ({})", op, call, device, cublasGetStatusName(status),
               cublasGetStatusString(status));
}

// A call that could not allocate device memory runs once more with the cache emptied (Note [Memory that CUDA
// libraries allocate themselves] in library_memory.h).
#define STRATA_CUBLAS_CHECK(expr, op, device)                                                                 \
  do {                                                                                                        \
    const int strata_cublas_device_ = (device);                                                               \
    const cublasStatus_t strata_cublas_status_ = ::strata::cuda::retry_after_emptying_cache(                  \
        [&] { return (expr); }, ::strata::cuda::cublas_failed_to_allocate,                                    \
        [&] { ::strata::empty_cache(::strata::Device(::strata::DeviceType::CUDA, strata_cublas_device_)); }); \
    if (strata_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                                        \
      ::strata::cuda::throw_cublas(strata_cublas_status_, #expr, (op), strata_cublas_device_);                \
    }                                                                                                         \
  } while (false)

// PyTorch's default workspace size: 32 MiB from Hopper (sm_90) on, as cuBLAS recommends there, else 8 MiB + 128 KiB.
std::size_t workspace_bytes(int device) {
  int major = 0;
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
                    fmt::format("reading the compute capability of cuda:{}", device));
  return major >= 9 ? std::size_t{32} << 20 : (std::size_t{8} << 20) + (std::size_t{128} << 10);
}

// Note [cuBLAS handles]
// A cuBLAS handle belongs to the device that was current when it was created, and must not be used by two host
// threads at once; setting its stream is cheap. So each host thread keeps one handle per device, created on first
// use and pointed at the op's stream before every call.
//
// Note [cuBLAS workspaces]
// Left to itself, cuBLAS takes its workspace with cudaMalloc, outside the caching allocator (Note [Memory that CUDA
// libraries allocate themselves] in library_memory.h). So each handle gets one from the allocator through
// cublasSetWorkspace, allocated for the stream the handle is pointed at; cublasSetStream drops it, so it is set again
// after every cublasSetStream. The workspace stays with its handle, alive, while the handle stays on that stream.
// When an op comes on another stream, the workspace goes back to the allocator, which hands it out again only on its
// own stream, after the GEMMs queued there (Note [Why blocks are per stream]), and one is allocated for the new
// stream. At thread exit the handles go first, then their workspaces, the same way.
class Handles {
 public:
  /// This thread's handle of `device`, pointed at `stream`, with a workspace from the caching allocator.
  cublasHandle_t get(int device, NativeStream stream, const char* op) {
    auto& e = handles_.at(device);
    Workspace& w = e.extra;
    if (e.handle == nullptr) {
      w.bytes = workspace_bytes(device);
      STRATA_CUBLAS_CHECK(cublasCreate(&e.handle), op, device);
    }
    if (!w.memory || w.stream != stream) {
      w.memory.reset();
      w.memory = allocator(Device(DeviceType::CUDA, device)).allocate(w.bytes, stream, op);
      w.stream = stream;
    }
    STRATA_CUBLAS_CHECK(cublasSetStream(e.handle, to_cuda_stream(stream)), op, device);
    STRATA_CUBLAS_CHECK(cublasSetWorkspace(e.handle, w.memory.get(), w.bytes), op, device);
    return e.handle;
  }

 private:
  struct Workspace {
    DataPtr memory;
    NativeStream stream = nullptr;  // the stream `memory` was allocated for
    std::size_t bytes = 0;
  };
  ThreadHandles<cublasHandle_t, cublasStatus_t, cublasDestroy, Workspace> handles_;
};

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
};

GemmTypes gemm_types(DType dtype, bool allow_tf32, const char* op) {
  switch (dtype) {
    case DType::F32: return {CUDA_R_32F, allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case DType::F64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case DType::F16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case DType::BF16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    default: STRATA_THROW(DTypeError, "{}: the CUDA GEMM does not support {} tensors", op, dtype);
  }
}

int as_int(int64_t value, const char* what, const char* op) {
  STRATA_CHECK(value <= std::numeric_limits<int>::max(), NotImplementedError,
               "{}: {} = {} exceeds what one cuBLAS call takes ({})", op, what, value, std::numeric_limits<int>::max());
  return static_cast<int>(value);
}

void gemm_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& a, const TensorView& b, double alpha,
                 double beta, bool allow_tf32) {
  const char* op = call.op;
  const int64_t batch = out.shape[0], m = out.shape[1], n = out.shape[2], k = a.shape[2];
  const int device = backend_index(call.device);
  RuntimeDeviceGuard guard(device);
  const auto element = static_cast<int64_t>(dtype_size(out.dtype));
  const auto* a_ptr = static_cast<const char*>(a.data) + a.offset * element;
  const auto* b_ptr = static_cast<const char*>(b.data) + b.offset * element;
  auto* out_ptr = static_cast<char*>(out.data) + out.offset * element;
  thread_local Handles handles;
  cublasHandle_t handle = handles.get(device, call.stream, op);

  // cuBLAS is column-major: the row-major out[m, n] is out^T[n, m] there, and out^T = b^T a^T. A row-major
  // operand is its own transpose in column-major terms (op N); a transposed view needs op T.
  const GemmTypes types = gemm_types(out.dtype, allow_tf32, op);
  const cublasOperation_t op_a = ops::gemm_transposed(a) ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = ops::gemm_transposed(b) ? CUBLAS_OP_T : CUBLAS_OP_N;
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const bool f64 = out.dtype == DType::F64;
  const void* alpha_p = f64 ? static_cast<const void*>(&alpha) : &alpha_f;
  const void* beta_p = f64 ? static_cast<const void*>(&beta) : &beta_f;
  STRATA_CUBLAS_CHECK(
      cublasGemmStridedBatchedEx(handle, op_b, op_a, as_int(n, "n", op), as_int(m, "m", op), as_int(k, "k", op),
                                 alpha_p, b_ptr, types.data, as_int(ops::gemm_leading_dim(b), "ldb", op), b.strides[0],
                                 a_ptr, types.data, as_int(ops::gemm_leading_dim(a), "lda", op), a.strides[0], beta_p,
                                 out_ptr, types.data, as_int(n, "n", op), m * n, as_int(batch, "batch", op),
                                 types.compute, CUBLAS_GEMM_DEFAULT),
      op, device);
}

}  // namespace

STRATA_REGISTER_KERNEL("gemm", CUDA, GemmFn, gemm_kernel);

}  // namespace strata::cuda
