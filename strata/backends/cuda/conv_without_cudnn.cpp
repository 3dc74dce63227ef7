// Convolution on CUDA in a build that found no cuDNN (backends/cuda/CMakeLists.txt compiles this file instead of
// conv.cpp): the ops are there and say what is missing, rather than "no kernel for cuda".
#include "strata/core/error.h"
#include "strata/ops/dnn_kernels.h"
#include "strata/ops/kernel_table.h"

namespace strata {
namespace {

[[noreturn]] void throw_without_cudnn(const ops::OpCall& call) {
  STRATA_THROW(NotImplementedError,
               "{}: convolution on CUDA needs cuDNN, which this build of the CUDA plugin did not find; install "
               "cuDNN 9 (in the CUDA toolkit's folder, or the nvidia-cudnn-cu13 wheel) and configure again",
               call.op);
}

void conv2d_kernel(const ops::OpCall& call, const TensorView&, const TensorView&, const TensorView&,
                   const TensorView&, const ops::Conv2dParams&) {
  throw_without_cudnn(call);
}

void conv2d_backward_kernel(const ops::OpCall& call, const TensorView&, const TensorView&, const TensorView&,
                            const TensorView&, const TensorView&, const TensorView&, const ops::Conv2dParams&) {
  throw_without_cudnn(call);
}

}  // namespace

STRATA_REGISTER_KERNEL("conv2d", CUDA, Conv2dFn, conv2d_kernel);
STRATA_REGISTER_KERNEL("conv2d_backward", CUDA, Conv2dBackwardFn, conv2d_backward_kernel);
}  // namespace strata
