// scaled_dot_product_attention on the GPU: the block kernels of backends/portable/attention_ops.h compiled by nvcc
// (and by hipcc for AMD, which compiles this file too).
#include "strata/backends/portable/attention_ops.h"
#include "strata/kernels/gpu_vendor.h"

namespace strata {
STRATA_REGISTER_KERNEL_WITH_DTYPES("scaled_dot_product_attention", STRATA_GPU_TYPE, AttentionForwardFn,
                                   portable::attention_blocks_forward, (ops::DTypeSet{DType::F32, DType::F64}));
STRATA_REGISTER_KERNEL_WITH_DTYPES("scaled_dot_product_attention_backward", STRATA_GPU_TYPE, AttentionBackwardFn,
                                   portable::attention_blocks_backward, (ops::DTypeSet{DType::F32, DType::F64}));
}  // namespace strata
