#include "strata/backends/portable/copy_fill.h"

namespace strata {
STRATA_REGISTER_KERNEL("copy", CUDA, CopyFn, portable::copy_kernel);
STRATA_REGISTER_KERNEL("fill", CUDA, FillFn, portable::fill_kernel);
}  // namespace strata
