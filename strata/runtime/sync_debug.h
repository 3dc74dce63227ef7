#pragma once

namespace strata {

/// What a host-blocking wait on a device does besides being counted (note_synchronization in transfer.h): nothing,
/// a warning on stderr, or a SyncDebugError (see docs/architecture.md, Debug modes).
enum class SyncDebugMode { Off, Warn, Error };
/// From STRATA_SYNC_DEBUG=warn|error at start-up; any other value is an error at start.
SyncDebugMode sync_debug_mode();
void set_sync_debug_mode(SyncDebugMode mode);

}  // namespace strata
