#include "strata/backends/portable/reduce_ops.h"
#include "strata/backends/portable/softmax_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("reduce", CPU, ReduceFn, portable::reduce_kernel);
STRATA_REGISTER_KERNEL("softmax", CPU, SoftmaxFn, portable::softmax_kernel);
}  // namespace strata
