// The CUDA GEMM (Note [One batched GEMM] in ops/matmul_kernels.h) on cuBLAS: one strided-batched call per product.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "strata/backends/cuda/cuda_check.h"
#include "strata/core/error.h"
#include "strata/ops/matmul_kernels.h"

namespace strata::cuda {

namespace {

[[noreturn]] void throw_cublas(cublasStatus_t status, const char* call, const char* op) {
  STRATA_THROW(BackendError, "{}: {} failed: {} ({})", op, call, cublasGetStatusName(status),
               cublasGetStatusString(status));
}

#define STRATA_CUBLAS_CHECK(expr, op)                                   \
  do {                                                                  \
    const cublasStatus_t strata_cublas_status_ = (expr);                \
    if (strata_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {  \
      ::strata::cuda::throw_cublas(strata_cublas_status_, #expr, (op)); \
    }                                                                   \
  } while (false)

// Note [cuBLAS handles]
// A cuBLAS handle belongs to the device that was current when it was created, and must not be used by two host
// threads at once; setting its stream is cheap. So each host thread keeps one handle per device, created on first
// use and pointed at the op's stream before every call.
class Handles {
 public:
  ~Handles() {
    // At thread exit; the runtime may already be going away, and a destructor must not throw.
    for (cublasHandle_t h : handles_) {
      if (h != nullptr) (void)cublasDestroy(h);
    }
  }
  cublasHandle_t get(int device, const char* op) {
    if (static_cast<std::size_t>(device) >= handles_.size()) handles_.resize(static_cast<std::size_t>(device) + 1);
    cublasHandle_t& h = handles_[static_cast<std::size_t>(device)];
    if (h == nullptr) STRATA_CUBLAS_CHECK(cublasCreate(&h), op);
    return h;
  }

 private:
  std::vector<cublasHandle_t> handles_;
};

// See Note [The CUDA default stream is the legacy stream] in cuda_backend.cpp.
cudaStream_t to_cuda_stream(NativeStream stream) {
  return stream == nullptr ? cudaStreamLegacy : static_cast<cudaStream_t>(stream);
}

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
  const int device = call.device.index() < 0 ? 0 : call.device.index();
  RuntimeDeviceGuard guard(device);
  const cudaStream_t stream = to_cuda_stream(call.stream);
  const auto element = static_cast<int64_t>(dtype_size(out.dtype));
  const auto* a_ptr = static_cast<const char*>(a.data) + a.offset * element;
  const auto* b_ptr = static_cast<const char*>(b.data) + b.offset * element;
  auto* out_ptr = static_cast<char*>(out.data) + out.offset * element;
  thread_local Handles handles;
  cublasHandle_t handle = handles.get(device, op);
  STRATA_CUBLAS_CHECK(cublasSetStream(handle, stream), op);

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
      op);
}

}  // namespace

STRATA_REGISTER_KERNEL("gemm", CUDA, GemmFn, gemm_kernel);

}  // namespace strata::cuda
