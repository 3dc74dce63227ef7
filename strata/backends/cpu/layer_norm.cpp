// layer_norm on the CPU: the kernels of backends/portable/layer_norm_ops.h on the thread pool.
#include "strata/backends/portable/layer_norm_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL_WITH_DTYPES("layer_norm", CPU, LayerNormForwardFn, portable::layer_norm_forward_kernel,
                                   ops::DTypeSet::floating());
STRATA_REGISTER_KERNEL_WITH_DTYPES("layer_norm_backward", CPU, LayerNormBackwardFn,
                                   portable::layer_norm_backward_kernel, ops::DTypeSet::floating());
}  // namespace strata
