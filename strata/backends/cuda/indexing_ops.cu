#include "strata/backends/portable/indexing_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("index_select", STRATA_GPU_TYPE, IndexSelectFn, portable::index_select_kernel);
STRATA_REGISTER_KERNEL("gather", STRATA_GPU_TYPE, GatherFn, portable::gather_kernel);
STRATA_REGISTER_KERNEL("scatter_add", STRATA_GPU_TYPE, ScatterAddFn, portable::scatter_add_kernel);
STRATA_REGISTER_KERNEL("one_hot", STRATA_GPU_TYPE, OneHotFn, portable::one_hot_kernel);
STRATA_REGISTER_KERNEL("topk", STRATA_GPU_TYPE, TopkFn, portable::topk_kernel);
}  // namespace strata
