#pragma once

namespace strata {

/// What a host-blocking wait on a device does besides being counted (note_synchronization in transfer.h): nothing,
/// a warning on stderr, or a SyncDebugError (see docs/architecture.md, Debug modes).
enum class SyncDebugMode { Off, Warn, Error };
/// From STRATA_SYNC_DEBUG=off|warn|error (or 0, 1, 2; any case), read once; any other value is an
/// InvalidArgumentError (Note [Strata's environment variables]).
SyncDebugMode sync_debug_mode();
void set_sync_debug_mode(SyncDebugMode mode);

}  // namespace strata
