#include "strata/backends/portable/copy_fill.h"

namespace strata {
STRATA_REGISTER_KERNEL_WITH_DTYPES("copy", STRATA_GPU_TYPE, CopyFn, portable::copy_kernel, portable::kCopyFillDTypes);
STRATA_REGISTER_KERNEL_WITH_DTYPES("fill", STRATA_GPU_TYPE, FillFn, portable::fill_kernel, portable::kCopyFillDTypes);
}  // namespace strata
