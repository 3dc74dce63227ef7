// Pooling on the GPU: the portable kernels of backends/portable/pool_ops.h compiled by nvcc.
#include "strata/backends/portable/pool_ops.h"

namespace strata {
static const bool pool_kernels_registered = (portable::register_pool_kernels(kGpuType), true);
}  // namespace strata
