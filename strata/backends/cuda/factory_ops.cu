#include "strata/backends/portable/factory_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("arange", CUDA, ArangeFn, portable::arange_kernel);
STRATA_REGISTER_KERNEL("linspace", CUDA, LinspaceFn, portable::linspace_kernel);
STRATA_REGISTER_KERNEL("eye", CUDA, EyeFn, portable::eye_kernel);
STRATA_REGISTER_KERNEL("random", CUDA, RandomFn, portable::random_kernel);
}  // namespace strata
