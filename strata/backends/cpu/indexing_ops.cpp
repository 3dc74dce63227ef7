#include "strata/backends/portable/indexing_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("index_select", CPU, IndexSelectFn, portable::index_select_kernel);
STRATA_REGISTER_KERNEL("gather", CPU, GatherFn, portable::gather_kernel);
STRATA_REGISTER_KERNEL("scatter_add", CPU, ScatterAddFn, portable::scatter_add_kernel);
STRATA_REGISTER_KERNEL("one_hot", CPU, OneHotFn, portable::one_hot_kernel);
STRATA_REGISTER_KERNEL("topk", CPU, TopkFn, portable::topk_kernel);
}  // namespace strata
