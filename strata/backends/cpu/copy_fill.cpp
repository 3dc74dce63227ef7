#include "strata/backends/portable/copy_fill.h"

namespace strata {
STRATA_REGISTER_KERNEL("copy", CPU, CopyFn, portable::copy_kernel);
STRATA_REGISTER_KERNEL("fill", CPU, FillFn, portable::fill_kernel);
}  // namespace strata
