#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "strata/core/device.h"
#include "strata/runtime/backend.h"
#include "strata/runtime/memory_stats.h"

namespace strata {

// What the caching allocator writes for people: the out-of-memory message and the summary table. Kept apart from
// the block bookkeeping in allocator.cpp; both functions are pure.

/// Everything the out-of-memory message reports, gathered by the allocator when a request fails.
struct OutOfMemoryReport {
  std::string op;  // the op that asked, or "allocation"
  Device device;
  std::size_t requested = 0;                // bytes as asked by the caller
  std::size_t rounded = 0;                  // bytes the allocator needed (after rounding)
  std::optional<MemoryInfo> device_memory;  // std::nullopt when the device could not be asked
  std::size_t allocated = 0;                // this process, through this allocator
  std::size_t reserved = 0;
  std::size_t largest_free_block = 0;
  std::optional<std::size_t> limit;
  bool stopped_by_limit = false;  // the limit, not the device, refused the new segment
};

/// The message of OutOfMemoryError, ending with a hint that fits the case: the limit, fragmentation of the cache,
/// or a real shortage of memory (see Note [Out-of-memory hints] in memory_report.cpp).
std::string out_of_memory_message(const OutOfMemoryReport& report);

/// A table of the statistics of one device's allocator, in the spirit of torch.cuda.memory_summary().
std::string format_memory_summary(Device device, const MemoryStats& stats, std::size_t largest_free_block);

}  // namespace strata
