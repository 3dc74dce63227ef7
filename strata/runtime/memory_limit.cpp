#include "strata/runtime/memory_limit.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

#include "strata/core/error.h"
#include "strata/runtime/cpu_devices.h"
#include "strata/runtime/environment.h"
#include "strata/runtime/registry.h"

namespace strata {

namespace {

constexpr std::uint64_t kMaxLimitBytes = static_cast<std::uint64_t>(std::numeric_limits<int64_t>::max());
constexpr std::string_view kAcceptedForm =
    "expected DEVICE=SIZE entries separated by commas, e.g. 'cuda:0=2GiB,cpu=8GiB', where DEVICE is cpu, cuda or "
    "cuda:N and SIZE is a number of bytes with an optional unit (B, KiB, MiB, GiB, TiB; KB, MB, GB, TB are powers "
    "of 1000) or a fraction of the device's total memory in (0, 1] written with a decimal point, such as 0.5";

[[noreturn]] void throw_bad_entry(std::string_view text, std::string_view entry, std::string_view why) {
  STRATA_THROW(InvalidArgumentError, "{}='{}': entry '{}' is malformed: {}; {}", kMemoryLimitVariable, text, entry, why,
               kAcceptedForm);
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

struct Unit {
  std::string_view name;
  std::uint64_t factor;
};

constexpr std::array<Unit, 9> kUnits{{{"B", 1},
                                      {"KiB", std::uint64_t{1} << 10},
                                      {"MiB", std::uint64_t{1} << 20},
                                      {"GiB", std::uint64_t{1} << 30},
                                      {"TiB", std::uint64_t{1} << 40},
                                      {"KB", 1'000},
                                      {"MB", 1'000'000},
                                      {"GB", 1'000'000'000},
                                      {"TB", 1'000'000'000'000}}};

const Unit* find_unit(std::string_view name) {
  for (const Unit& unit : kUnits) {
    if (same_ignoring_case(unit.name, name)) return &unit;
  }
  return nullptr;
}

// Parses SIZE of one entry into `limit`; throws naming `text` and `entry` when it is malformed.
void parse_size(std::string_view text, std::string_view entry, std::string_view size, MemoryLimit& limit) {
  const auto number_end = size.find_first_not_of("0123456789.");
  const std::string_view number = size.substr(0, number_end);
  const std::string_view unit_name = trim(number_end == std::string_view::npos ? "" : size.substr(number_end));
  const auto point = number.find('.');
  const bool has_point = point != std::string_view::npos;
  if (number.find_first_of("0123456789") == std::string_view::npos ||
      (has_point && number.find('.', point + 1) != std::string_view::npos)) {
    throw_bad_entry(text, entry, fmt::format("'{}' does not start with a number", size));
  }
  const char* begin = number.data();
  const char* end = number.data() + number.size();

  if (!has_point) {
    std::uint64_t value = 0;
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr != end) throw_bad_entry(text, entry, fmt::format("'{}' is too large", size));
    std::uint64_t factor = 1;
    if (!unit_name.empty()) {
      const Unit* unit = find_unit(unit_name);
      if (unit == nullptr) throw_bad_entry(text, entry, fmt::format("unknown unit '{}'", unit_name));
      factor = unit->factor;
    }
    std::uint64_t bytes = 0;
    // The allocator counts bytes in int64.
    if (__builtin_mul_overflow(value, factor, &bytes) || bytes > kMaxLimitBytes) {
      throw_bad_entry(text, entry, fmt::format("'{}' is too large (the most is 2^63-1 bytes)", size));
    }
    if (bytes == 0) throw_bad_entry(text, entry, "a limit must be positive");
    limit.bytes = bytes;
    return;
  }

  double value = 0;
  const auto [ptr, ec] = std::from_chars(begin, end, value, std::chars_format::fixed);
  if (ec != std::errc() || ptr != end) throw_bad_entry(text, entry, fmt::format("'{}' is not a number", number));
  if (unit_name.empty()) {
    if (!(value > 0.0 && value <= 1.0)) {
      throw_bad_entry(text, entry,
                      fmt::format("a number without a unit and with a decimal point is a fraction of the device's "
                                  "total memory and must be in (0, 1], not {}",
                                  number));
    }
    limit.fraction = value;
    return;
  }
  const Unit* unit = find_unit(unit_name);
  if (unit == nullptr) throw_bad_entry(text, entry, fmt::format("unknown unit '{}'", unit_name));
  const double bytes = std::floor(value * static_cast<double>(unit->factor));
  if (bytes >= std::ldexp(1.0, 63)) {
    throw_bad_entry(text, entry, fmt::format("'{}' is too large (the most is 2^63-1 bytes)", size));
  }
  if (bytes < 1.0) throw_bad_entry(text, entry, "a limit must be positive");
  limit.bytes = static_cast<std::size_t>(bytes);
}

MemoryLimit parse_entry(std::string_view text, std::string_view entry) {
  const auto equals = entry.find('=');
  if (equals == std::string_view::npos) throw_bad_entry(text, entry, "it has no '='");
  const std::string_view device_name = trim(entry.substr(0, equals));
  const std::string_view size = trim(entry.substr(equals + 1));
  MemoryLimit limit;
  try {
    limit.device = Device(device_name);
    limit.whole_type = device_name.find(':') == std::string_view::npos;
  } catch (const InvalidArgumentError&) {
    throw_bad_entry(text, entry, fmt::format("'{}' is not a device", device_name));
  }
  if (size.empty()) throw_bad_entry(text, entry, "the size is missing");
  parse_size(text, entry, size, limit);
  return limit;
}

}  // namespace

std::string format_bytes(std::size_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static constexpr std::array<const char*, 5> kNames{"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  // 1023.995 would print as "1024.00"; show it as "1.00" of the next unit instead.
  while (value >= 1023.995 && unit + 1 < kNames.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kNames[unit]);
}

std::size_t MemoryLimit::resolve(std::size_t total_memory) const {
  if (bytes) return *bytes;
  // At least one byte, as the smallest limit in bytes: a positive fraction is never "no memory at all".
  return std::max<std::size_t>(
      1, static_cast<std::size_t>(std::floor(fraction.value_or(1.0) * static_cast<double>(total_memory))));
}

std::vector<MemoryLimit> parse_memory_limits(std::string_view text) {
  std::vector<MemoryLimit> limits;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view entry = trim(text.substr(start, comma - start));
    start = comma + 1;
    if (entry.empty()) continue;
    MemoryLimit limit = parse_entry(text, entry);
    for (const MemoryLimit& earlier : limits) {
      if (earlier.device == limit.device && earlier.whole_type == limit.whole_type) {
        throw_bad_entry(text, entry, fmt::format("device {} is given a limit twice", limit.device));
      }
    }
    limits.push_back(limit);
  }
  // A value of commas alone sets no limit: it is refused, as a typo rather than a wish.
  if (limits.empty() && !trim(text).empty()) {
    STRATA_THROW(InvalidArgumentError, "{}='{}' names no device; {}", kMemoryLimitVariable, text, kAcceptedForm);
  }
  return limits;
}

std::optional<MemoryLimit> find_memory_limit(const std::vector<MemoryLimit>& limits, Device device) {
  const MemoryLimit* found = nullptr;
  for (const MemoryLimit& limit : limits) {
    if (limit.whole_type ? limit.device.type() != device.type() : limit.device != device) continue;
    if (!limit.whole_type) return limit;
    found = &limit;
  }
  if (found == nullptr) return std::nullopt;
  return *found;
}

void check_memory_limit_devices(std::string_view text, const std::vector<MemoryLimit>& limits, DeviceType type,
                                int count) {
  for (const MemoryLimit& limit : limits) {
    if (limit.whole_type || limit.device.type() != type || limit.device.index() < count) continue;
    STRATA_THROW(InvalidArgumentError, "{}='{}' limits {}, which does not exist: there {} {} {} device(s){}",
                 kMemoryLimitVariable, text, limit.device, count == 1 ? "is" : "are", count, device_type_name(type),
                 type == DeviceType::CPU ? fmt::format("; {}=N sets how many", kCpuDevicesVariable) : "");
  }
}

std::optional<MemoryLimit> memory_limit_from_environment(Device device) {
  const auto value = environment_value(kMemoryLimitVariable);
  if (!value) return std::nullopt;
  const std::vector<MemoryLimit> limits = parse_memory_limits(*value);
  check_memory_limit_devices(*value, limits, device.type(), device_count(device.type()));
  return find_memory_limit(limits, device);
}

}  // namespace strata
