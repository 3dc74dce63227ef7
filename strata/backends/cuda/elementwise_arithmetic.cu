// One family of elementwise ops per .cu file (Note [Elementwise families] in backends/portable/elementwise_ops.h).
#include "strata/backends/portable/elementwise_ops.h"

namespace strata {
static const bool arithmetic_kernels_registered = (portable::register_arithmetic_kernels(kGpuType), true);
}  // namespace strata
