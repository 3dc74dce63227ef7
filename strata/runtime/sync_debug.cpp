#include "strata/runtime/sync_debug.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "strata/core/error.h"

namespace strata {

namespace {

SyncDebugMode parse_sync_debug() {
  const char* env = std::getenv("STRATA_SYNC_DEBUG");
  if (env == nullptr) return SyncDebugMode::Off;
  const std::string_view v(env);
  if (v.empty() || v == "0" || v == "off") return SyncDebugMode::Off;
  if (v == "warn" || v == "1") return SyncDebugMode::Warn;
  if (v == "error" || v == "2") return SyncDebugMode::Error;
  STRATA_THROW(InvalidArgumentError, "STRATA_SYNC_DEBUG='{}' is not valid; expected 'warn', 'error' or 'off'", v);
}

std::atomic<SyncDebugMode>& sync_mode() {
  static std::atomic<SyncDebugMode> mode{parse_sync_debug()};
  return mode;
}

}  // namespace

SyncDebugMode sync_debug_mode() { return sync_mode().load(); }
void set_sync_debug_mode(SyncDebugMode mode) { sync_mode().store(mode); }

}  // namespace strata
