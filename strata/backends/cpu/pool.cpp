// Pooling on the CPU: the portable kernels of backends/portable/pool_ops.h on our thread pool.
#include "strata/backends/portable/pool_ops.h"

namespace strata {
static const bool pool_kernels_registered = (portable::register_pool_kernels(DeviceType::CPU), true);
}  // namespace strata
