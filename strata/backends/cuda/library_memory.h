#pragma once

// Free of CUDA headers, so that the policy below is tested on machines without CUDA as well.

#include <string_view>

#include "strata/core/device.h"
#include "strata/core/error.h"

namespace strata::cuda {

// Note [Memory that CUDA libraries allocate themselves]
// cuBLAS and cuDNN take their workspaces from the caching allocator (Note [cuBLAS workspaces] in matmul.cpp; conv.cpp
// asks for each call's), so the allocator's limit, statistics and out-of-memory messages cover them. Some of their
// calls still allocate device memory with cudaMalloc behind our back: creating a handle, and in cuDNN some
// executions. When the caching allocator holds the device's free memory in its cache, such a call fails with an
// allocation status although the memory is only cached. So it is run once more after the cache has been returned to
// the device, as the allocator does for its own requests; a second failure is an OutOfMemoryError naming the op and
// the library, which a user can act on, rather than a BackendError.

/// Runs `call`, which returns a library status; when `failed_to_allocate(status)`, runs `empty_cache()` and then
/// `call` once more, and returns that status. `failed_to_allocate` also clears what the failure left behind (the
/// CUDA runtime's last error).
template <typename Call, typename FailedToAllocate, typename EmptyCache>
auto retry_after_emptying_cache(Call&& call, FailedToAllocate&& failed_to_allocate, EmptyCache&& empty_cache) {
  auto status = call();
  if (!failed_to_allocate(status)) return status;
  empty_cache();
  status = call();
  return status;
}

/// The error for a library call that could not allocate device memory even with the cache emptied.
[[noreturn]] inline void throw_library_out_of_memory(std::string_view op, std::string_view library,
                                                     std::string_view call, std::string_view status, Device device) {
  STRATA_THROW(OutOfMemoryError,
               "{}: {} could not allocate memory on {} for {} ({}), even after Strata returned its cached memory to "
               "the device; free tensors you no longer need or reduce the batch size",
               op, library, device, call, status);
}

}  // namespace strata::cuda
