#include "strata/backends/portable/factory_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("arange", STRATA_GPU_TYPE, ArangeFn, portable::arange_kernel);
STRATA_REGISTER_KERNEL("linspace", STRATA_GPU_TYPE, LinspaceFn, portable::linspace_kernel);
STRATA_REGISTER_KERNEL("eye", STRATA_GPU_TYPE, EyeFn, portable::eye_kernel);
STRATA_REGISTER_KERNEL("random", STRATA_GPU_TYPE, RandomFn, portable::random_kernel);
STRATA_REGISTER_KERNEL("multinomial", STRATA_GPU_TYPE, MultinomialFn, portable::multinomial_kernel);
}  // namespace strata
