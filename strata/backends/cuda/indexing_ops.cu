#include "strata/backends/portable/indexing_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("index_select", CUDA, IndexSelectFn, portable::index_select_kernel);
STRATA_REGISTER_KERNEL("gather", CUDA, GatherFn, portable::gather_kernel);
STRATA_REGISTER_KERNEL("scatter_add", CUDA, ScatterAddFn, portable::scatter_add_kernel);
STRATA_REGISTER_KERNEL("one_hot", CUDA, OneHotFn, portable::one_hot_kernel);
}  // namespace strata
