// The extremum family of reductions (Note [Reduction families] in backends/portable/reduce_ops.h).
#include "strata/backends/portable/reduce_ops.h"

namespace strata::portable {
template void reduce_family<ReduceFamily::Extremum>(const kernels::LaunchSite&, const TensorView&, const TensorView&,
                                                    const ops::ReduceParams&);
}  // namespace strata::portable
