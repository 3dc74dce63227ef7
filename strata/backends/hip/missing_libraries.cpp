// The ops of the HIP plugin that need a vendor library Debian 12 does not package: matrix products (hipBLAS or
// rocBLAS) and convolution (MIOpen). They are registered so that a call says what is missing rather than "no kernel
// for hip", with an empty dtype list, so that supports(HIP, op, dtype) answers no for every dtype and the op-coverage
// table shows them as stand-ins: what HIP lacks. Decision: no hand-written GEMM or convolution kernel
// stands in for them. It could be neither run nor timed on our machines, which have no AMD GPU, and a slow or wrong
// product would be worse than a clear error.
#include "strata/core/error.h"
#include "strata/ops/dnn_kernels.h"
#include "strata/ops/kernel_table.h"
#include "strata/ops/matmul_kernels.h"

namespace strata {
namespace {

[[noreturn]] void throw_missing(const ops::OpCall& call, const char* what, const char* library) {
  STRATA_THROW(NotImplementedError,
               "{}: {} on HIP needs {}, which this build of the HIP plugin does not use (Debian 12 does not package "
               "it); run this op on the CPU or on CUDA, or build the plugin against a ROCm install that has it",
               call.op, what, library);
}

void gemm_kernel(const ops::OpCall& call, const TensorView&, const TensorView&, const TensorView&, double, double,
                 bool) {
  throw_missing(call, "a matrix product", "hipBLAS (or rocBLAS)");
}

void conv2d_kernel(const ops::OpCall& call, const TensorView&, const TensorView&, const TensorView&,
                   const TensorView&, const ops::Conv2dParams&) {
  throw_missing(call, "convolution", "MIOpen");
}

void conv2d_backward_kernel(const ops::OpCall& call, const TensorView&, const TensorView&, const TensorView&,
                            const TensorView&, const TensorView&, const TensorView&, const ops::Conv2dParams&) {
  throw_missing(call, "convolution", "MIOpen");
}

}  // namespace

STRATA_REGISTER_KERNEL_WITH_DTYPES("gemm", HIP, GemmFn, gemm_kernel, ops::DTypeSet{});
STRATA_REGISTER_KERNEL_WITH_DTYPES("conv2d", HIP, Conv2dFn, conv2d_kernel, ops::DTypeSet{});
STRATA_REGISTER_KERNEL_WITH_DTYPES("conv2d_backward", HIP, Conv2dBackwardFn, conv2d_backward_kernel,
                                   ops::DTypeSet{});
}  // namespace strata
