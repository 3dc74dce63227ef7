// Reading STRATA_* variables: see Note [Strata's environment variables].
#include "strata/runtime/environment.h"

#include <fmt/format.h>

#include <cstdlib>

#include "strata/core/error.h"
#include "strata/runtime/cpu_devices.h"
#include "strata/runtime/kernel_assert.h"
#include "strata/runtime/parallel.h"
#include "strata/runtime/sync_debug.h"

namespace strata {

bool same_ignoring_case(std::string_view a, std::string_view b) {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::optional<std::string> environment_value(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::size_t environment_keyword(const char* name, std::string_view value,
                                std::initializer_list<std::string_view> keywords) {
  std::size_t index = 0;
  for (const std::string_view keyword : keywords) {
    if (same_ignoring_case(value, keyword)) return index;
    ++index;
  }
  STRATA_THROW(InvalidArgumentError, "{}='{}' is not valid; expected one of {} (case does not matter), or unset", name,
               value, fmt::join(keywords, ", "));
}

bool environment_switch(const char* name, std::string_view value) {
  return environment_keyword(name, value, {"1", "true", "yes", "on", "0", "false", "no", "off"}) < 4;
}

void check_environment() {
  (void)cpu_device_count();
  (void)sync_debug_mode();
  (void)launch_blocking();
  (void)thread_budget_follows_load();
  // STRATA_MEMORY_LIMIT is read as each device's allocator is created, the first CPU one among them.
}

}  // namespace strata
