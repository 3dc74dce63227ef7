#pragma once

#include <cstddef>

#include "strata/runtime/allocator.h"

namespace strata {

/// Page-locked host memory from the GPU backend when one is available (plain host memory otherwise), cached like
/// device memory. Copies from it to a GPU can run asynchronously; a freed block is not handed out again before the
/// copies recorded on it have run (DataPtr::record_stream; Tensor::to records its own).
DataPtr allocate_pinned(std::size_t bytes);
/// The allocator behind allocate_pinned (for statistics and empty_cache).
CachingAllocator& pinned_allocator();

}  // namespace strata
