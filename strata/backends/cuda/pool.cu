// Pooling on the GPU: the portable kernels of backends/portable/pool_ops.h compiled by nvcc.
#include "strata/backends/portable/pool_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("max_pool2d", CUDA, MaxPool2dFn, portable::max_pool2d_kernel);
STRATA_REGISTER_KERNEL("max_pool2d_backward", CUDA, MaxPool2dBackwardFn, portable::max_pool2d_backward_kernel);
STRATA_REGISTER_KERNEL("avg_pool2d", CUDA, AvgPool2dFn, portable::avg_pool2d_kernel);
STRATA_REGISTER_KERNEL("avg_pool2d_backward", CUDA, AvgPool2dBackwardFn, portable::avg_pool2d_backward_kernel);
STRATA_REGISTER_KERNEL("adaptive_avg_pool2d", CUDA, AdaptiveAvgPool2dFn, portable::adaptive_avg_pool2d_kernel);
STRATA_REGISTER_KERNEL("adaptive_avg_pool2d_backward", CUDA, AdaptiveAvgPool2dBackwardFn,
                       portable::adaptive_avg_pool2d_backward_kernel);
}  // namespace strata
