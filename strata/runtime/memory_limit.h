#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/device.h"

namespace strata {

/// Bytes in human units: "512 B" below 1 KiB, else two decimals in binary units ("1.50 KiB", "2.00 GiB").
std::string format_bytes(std::size_t bytes);

/// The environment variable that limits the memory of devices, e.g. `cuda:0=2GiB,cpu=8GiB`.
inline constexpr const char* kMemoryLimitVariable = "STRATA_MEMORY_LIMIT";

// Note [STRATA_MEMORY_LIMIT]
// The value is a comma-separated list of DEVICE=SIZE entries, e.g. `cuda:0=2GiB,cpu=8GiB`. Spaces around entries,
// around '=' and between a number and its unit are ignored; empty entries (a trailing comma) are skipped, but a
// value with no entry at all (',') is refused.
//  * DEVICE is anything Device() accepts: `cpu:N`, `cuda:N`, or a type alone, `cpu` or `cuda`, meaning every
//    device of that type that has no entry of its own (with one CPU device, `cpu` is that device). A device may be
//    named only once.
//  * SIZE is one of
//    - a whole number of bytes: `1073741824`;
//    - a number (decimals allowed) with a unit: `2GiB`, `1.5 MiB`, `512B`. B, KiB, MiB, GiB and TiB are powers
//      of 1024; KB, MB, GB and TB are powers of 1000 (as disk makers use them). Units ignore case;
//    - a number with a decimal point and no unit, in (0, 1]: a fraction of the device's total memory, so
//      `cuda:0=0.5` is half of the GPU and `cuda:0=1.0` all of it. A unitless number without a point is bytes,
//      so write the point for fractions (`1.0`, not `1`).
//  Limits are rounded down to whole bytes and must be positive. Anything else throws InvalidArgumentError that
//  names the variable, the bad entry and the accepted form. The variable is read when a device's allocator is
//  created (on the first allocation on that device), so it must be set before then.

/// One entry of STRATA_MEMORY_LIMIT: a limit in bytes or as a fraction of a device's total memory.
struct MemoryLimit {
  Device device;
  std::optional<std::size_t> bytes;  // exactly one of `bytes` and `fraction` is set
  std::optional<double> fraction;
  bool whole_type = false;  // the entry named a type alone ("cpu", "cuda"); `device` is then Device(type)

  /// The limit in bytes on a device that has `total_memory` bytes.
  std::size_t resolve(std::size_t total_memory) const;
  friend bool operator==(const MemoryLimit&, const MemoryLimit&) = default;
};

/// Parses a value of STRATA_MEMORY_LIMIT (see Note [STRATA_MEMORY_LIMIT]); pure, so tests call it directly.
std::vector<MemoryLimit> parse_memory_limits(std::string_view text);

/// The entry that applies to `device`: its own, else one for its whole type ("cpu", "cuda"); std::nullopt when none.
std::optional<MemoryLimit> find_memory_limit(const std::vector<MemoryLimit>& limits, Device device);

/// Throws InvalidArgumentError when an entry of `limits` (parsed from `text`) names a device of `type` at an index
/// `count` or beyond: a limit on a device that does not exist is a mistake, not a no-op.
void check_memory_limit_devices(std::string_view text, const std::vector<MemoryLimit>& limits, DeviceType type,
                                int count);

/// The STRATA_MEMORY_LIMIT entry for `device`, read from the environment now; std::nullopt when none applies. Every
/// entry for a device of its type must name one that exists (check_memory_limit_devices).
std::optional<MemoryLimit> memory_limit_from_environment(Device device);

}  // namespace strata
