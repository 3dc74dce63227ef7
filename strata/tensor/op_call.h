#pragma once

#include <source_location>

#include "strata/ops/kernel_table.h"
#include "strata/runtime/stream.h"

namespace strata::detail {

/// The OpCall for running `op` on `device`'s current stream. `device` is a tensor's, so it exists: the handle is
/// read without building a Stream (whose copy would touch a shared reference count on every op).
inline ops::OpCall op_call(const char* op, Device device,
                           std::source_location where = std::source_location::current()) {
  return {op, device, device.is_cpu() ? nullptr : current_native_stream(device), where};
}

}  // namespace strata::detail
