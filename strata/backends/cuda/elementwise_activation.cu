// One family of elementwise ops per .cu file (Note [Elementwise families] in backends/portable/elementwise_ops.h).
#include "strata/backends/portable/elementwise_ops.h"

namespace strata {
static const bool activation_kernels_registered = (portable::register_activation_kernels(kGpuType), true);
}  // namespace strata
