#pragma once

// Where a portable kernel launches: the op call's device, stream and names, as kernels::LaunchSite carries them to
// the launch and to device-side assert messages. Every kernel family starts from it.

#include "strata/kernels/launch.h"
#include "strata/ops/kernel_table.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

inline kernels::LaunchSite site_of(const ops::OpCall& call, const char* kernel) {
  return {call.device, call.stream, kernel, call.op, call.where};
}

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
