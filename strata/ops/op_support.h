#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strata/core/device.h"
#include "strata/core/dtype.h"

namespace strata {

/// Whether device type `type` has a kernel for the op `op` that handles `dtype`, so that a caller or a test can
/// ask before it calls. `op` is a name of the op table (op_names() lists them), which is the kernel's name, not
/// always the public function's: sum, mean, max and the other reductions share "reduce", and sub is "add".
///
/// The answer is per dtype only for the kernels whose registration lists their dtypes: copy, fill, the
/// elementwise ops and pooling. For every other op (reductions, softmax, indexing, factories, gemm, conv2d) the
/// op table does not know which dtypes the kernel's dispatch accepts, and supports() answers whether `type` has a
/// kernel for `op` at all, whatever `dtype` is; the op's own check still rejects a dtype it does not handle, with
/// a DTypeError (Note [What the op table knows about dtypes] in ops/kernel_table.h).
///
/// False when `type` has no kernel for `op`, and for a device type that is unavailable (asking about CUDA loads
/// the plugin first, which fills the CUDA column). Throws InvalidArgumentError when the op table has no op of
/// that name.
bool supports(DeviceType type, std::string_view op, DType dtype);
/// Whether `type` has a kernel for `op`, for any dtype; not for a kernel that lists no dtype at all, a stand-in that
/// only says what is missing. Throws InvalidArgumentError for an unknown op name.
bool supports(DeviceType type, std::string_view op);
/// The names of the op table, sorted.
std::vector<std::string> op_names();

}  // namespace strata
