#pragma once

#include <cstddef>

#include "strata/runtime/allocator.h"

namespace strata {

/// Page-locked host memory from the GPU backend when one is available (plain host memory otherwise), cached like
/// device memory. Copies from it to a GPU can run asynchronously.
DataPtr allocate_pinned(std::size_t bytes);
/// The allocator behind allocate_pinned (for statistics and empty_cache).
CachingAllocator& pinned_allocator();

}  // namespace strata
