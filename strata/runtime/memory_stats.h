#pragma once

#include <cstdint>
#include <optional>

namespace strata {

/// A statistic tracked by the caching allocator: its current value, the highest it reached since the last
/// `reset_peak_stats`, and the running total of increases ("allocated" counts every allocation ever made).
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t total = 0;
};

/// One device's allocator figures; mirrors what users know from torch.cuda.memory_stats().
struct MemoryStats {
  Stat allocated_bytes;  // handed to callers (rounded sizes)
  Stat reserved_bytes;   // obtained from the backend, cached or in use
  Stat active_bytes;     // in blocks that are in use, including the unused tail of a block
  Stat allocated_blocks;
  Stat reserved_segments;  // backend allocations currently held
  Stat active_blocks;
  int64_t requested_bytes = 0;  // current bytes exactly as requested by callers
  int64_t backend_allocations = 0;
  int64_t backend_frees = 0;
  int64_t oom_count = 0;
  int64_t retries = 0;  // times the cache was released to retry a failed backend allocation
  std::optional<int64_t> limit_bytes;
};

}  // namespace strata
