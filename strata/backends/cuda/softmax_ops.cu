#include "strata/backends/portable/softmax_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("softmax", STRATA_GPU_TYPE, SoftmaxFn, portable::softmax_kernel);
}  // namespace strata
