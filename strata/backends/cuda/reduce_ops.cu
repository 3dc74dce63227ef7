#include "strata/backends/portable/reduce_ops.h"
#include "strata/backends/portable/softmax_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("reduce", CUDA, ReduceFn, portable::reduce_kernel);
STRATA_REGISTER_KERNEL("softmax", CUDA, SoftmaxFn, portable::softmax_kernel);
}  // namespace strata
