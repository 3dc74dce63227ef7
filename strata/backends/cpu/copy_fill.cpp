#include "strata/backends/portable/copy_fill.h"

namespace strata {
STRATA_REGISTER_KERNEL_WITH_DTYPES("copy", CPU, CopyFn, portable::copy_kernel, portable::kCopyFillDTypes);
STRATA_REGISTER_KERNEL_WITH_DTYPES("fill", CPU, FillFn, portable::fill_kernel, portable::kCopyFillDTypes);
}  // namespace strata
