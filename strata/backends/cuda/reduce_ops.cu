// The "reduce" row of the op table; each family is compiled in its own file (Note [Reduction families] in
// backends/portable/reduce_ops.h).
#include "strata/backends/portable/reduce_ops.h"

namespace strata {
namespace portable {
extern template void reduce_family<ReduceFamily::Sum>(const kernels::LaunchSite&, const TensorView&, const TensorView&,
                                                      const ops::ReduceParams&);
extern template void reduce_family<ReduceFamily::Extremum>(const kernels::LaunchSite&, const TensorView&,
                                                           const TensorView&, const ops::ReduceParams&);
extern template void reduce_family<ReduceFamily::Moments>(const kernels::LaunchSite&, const TensorView&,
                                                          const TensorView&, const ops::ReduceParams&);
}  // namespace portable

STRATA_REGISTER_KERNEL("reduce", STRATA_GPU_TYPE, ReduceFn, portable::reduce_kernel);
}  // namespace strata
