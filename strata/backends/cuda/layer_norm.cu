// layer_norm on the GPU: the kernels of backends/portable/layer_norm_ops.h compiled by nvcc (and by hipcc for AMD,
// which compiles this file too).
#include "strata/backends/portable/layer_norm_ops.h"
#include "strata/kernels/gpu_vendor.h"

namespace strata {
STRATA_REGISTER_KERNEL_WITH_DTYPES("layer_norm", STRATA_GPU_TYPE, LayerNormForwardFn,
                                   portable::layer_norm_forward_kernel, ops::DTypeSet::floating());
STRATA_REGISTER_KERNEL_WITH_DTYPES("layer_norm_backward", STRATA_GPU_TYPE, LayerNormBackwardFn,
                                   portable::layer_norm_backward_kernel, ops::DTypeSet::floating());
}  // namespace strata
