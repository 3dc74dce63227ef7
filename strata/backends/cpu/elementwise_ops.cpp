#include "strata/backends/portable/elementwise_ops.h"

namespace strata {
static const bool elementwise_kernels_registered = (portable::register_elementwise_kernels(DeviceType::CPU), true);
}  // namespace strata
