#pragma once

#include <string_view>

#include "strata/core/error.h"
#include "strata/kernels/gpu_vendor.h"

namespace strata::cuda {

/// Throws BackendError naming what failed, CUDA's name and text for the error, and the call that returned it.
[[noreturn]] inline void throw_cuda_error(cudaError_t error, std::string_view call, std::string_view what) {
  STRATA_THROW(BackendError, "{} failed: {} ({}) from {}", what, cudaGetErrorName(error), cudaGetErrorString(error),
               call);
}

}  // namespace strata::cuda

/// Evaluates a CUDA runtime call and throws BackendError when it does not return cudaSuccess; `what` says what
/// was being done in the user's words (a string or a std::string), e.g.
/// STRATA_CUDA_CHECK(cudaMalloc(&p, n), "raw_allocate on cuda:0"). The error is cleared from the runtime's
/// last-error slot first so that later, unrelated calls do not report it again.
#define STRATA_CUDA_CHECK(expr, what)                                      \
  do {                                                                     \
    const cudaError_t strata_cuda_error_ = (expr);                         \
    if (strata_cuda_error_ != cudaSuccess) [[unlikely]] {                  \
      (void)cudaGetLastError();                                            \
      ::strata::cuda::throw_cuda_error(strata_cuda_error_, #expr, (what)); \
    }                                                                      \
  } while (false)

namespace strata::cuda {

/// Makes `index` the CUDA runtime's current device for the scope and restores the previous one afterwards. This
/// is the plugin's own guard, used around every per-device call; code above the backend uses
/// strata::cuda::DeviceGuard (runtime/cuda.h). cudaSetDevice is called only when the device really changes.
class RuntimeDeviceGuard {
 public:
  explicit RuntimeDeviceGuard(int index) : index_(index) {
    STRATA_CUDA_CHECK(cudaGetDevice(&previous_), "reading the current GPU device");
    if (previous_ != index_)
      STRATA_CUDA_CHECK(cudaSetDevice(index_), fmt::format("selecting {}", Device(kGpuType, index_)));
  }
  // Going back cannot reasonably fail once selecting worked, and a destructor must not throw.
  ~RuntimeDeviceGuard() {
    if (previous_ != index_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  RuntimeDeviceGuard(const RuntimeDeviceGuard&) = delete;
  RuntimeDeviceGuard& operator=(const RuntimeDeviceGuard&) = delete;

 private:
  int index_;
  int previous_ = -1;
};

}  // namespace strata::cuda
