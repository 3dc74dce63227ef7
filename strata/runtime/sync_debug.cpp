#include "strata/runtime/sync_debug.h"

#include <atomic>

#include "strata/runtime/environment.h"

namespace strata {

namespace {

// See Note [Strata's environment variables].
SyncDebugMode parse_sync_debug() {
  const auto value = environment_value("STRATA_SYNC_DEBUG");
  if (!value) return SyncDebugMode::Off;
  switch (environment_keyword("STRATA_SYNC_DEBUG", *value, {"off", "0", "warn", "1", "error", "2"}) / 2) {
    case 0: return SyncDebugMode::Off;
    case 1: return SyncDebugMode::Warn;
    default: return SyncDebugMode::Error;
  }
}

std::atomic<SyncDebugMode>& sync_mode() {
  static std::atomic<SyncDebugMode> mode{parse_sync_debug()};
  return mode;
}

}  // namespace

SyncDebugMode sync_debug_mode() { return sync_mode().load(); }
void set_sync_debug_mode(SyncDebugMode mode) { sync_mode().store(mode); }

}  // namespace strata
