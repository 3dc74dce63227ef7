#include "strata/backends/portable/factory_ops.h"

namespace strata {
STRATA_REGISTER_KERNEL("arange", CPU, ArangeFn, portable::arange_kernel);
STRATA_REGISTER_KERNEL("linspace", CPU, LinspaceFn, portable::linspace_kernel);
STRATA_REGISTER_KERNEL("eye", CPU, EyeFn, portable::eye_kernel);
STRATA_REGISTER_KERNEL("random", CPU, RandomFn, portable::random_kernel);
STRATA_REGISTER_KERNEL("multinomial", CPU, MultinomialFn, portable::multinomial_kernel);
}  // namespace strata
