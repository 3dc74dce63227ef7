// Pooling on the CPU: the portable kernels of backends/portable/pool_ops.h on our thread pool.
#include "strata/backends/portable/pool_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("max_pool2d", CPU, MaxPool2dFn, portable::max_pool2d_kernel);
STRATA_REGISTER_KERNEL("max_pool2d_backward", CPU, MaxPool2dBackwardFn, portable::max_pool2d_backward_kernel);
STRATA_REGISTER_KERNEL("avg_pool2d", CPU, AvgPool2dFn, portable::avg_pool2d_kernel);
STRATA_REGISTER_KERNEL("avg_pool2d_backward", CPU, AvgPool2dBackwardFn, portable::avg_pool2d_backward_kernel);
STRATA_REGISTER_KERNEL("adaptive_avg_pool2d", CPU, AdaptiveAvgPool2dFn, portable::adaptive_avg_pool2d_kernel);
STRATA_REGISTER_KERNEL("adaptive_avg_pool2d_backward", CPU, AdaptiveAvgPool2dBackwardFn,
                       portable::adaptive_avg_pool2d_backward_kernel);
}  // namespace strata
