#include "strata/backends/portable/softmax_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("softmax", CUDA, SoftmaxFn, portable::softmax_kernel);
}  // namespace strata
