#include "strata/backends/portable/copy_fill.h"

namespace strata {
STRATA_REGISTER_KERNEL_WITH_DTYPES("copy", CUDA, CopyFn, portable::copy_kernel, portable::kCopyFillDTypes);
STRATA_REGISTER_KERNEL_WITH_DTYPES("fill", CUDA, FillFn, portable::fill_kernel, portable::kCopyFillDTypes);
}  // namespace strata
