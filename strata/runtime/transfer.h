#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/core/device.h"
#include "strata/runtime/backend.h"

namespace strata {

/// Always-on counters of what costs time between host and device (see docs/architecture.md, Debug modes).
struct TransferCounters {
  int64_t host_to_device_copies = 0;
  int64_t host_to_device_bytes = 0;
  int64_t device_to_host_copies = 0;
  int64_t device_to_host_bytes = 0;
  int64_t device_to_device_copies = 0;
  int64_t device_to_device_bytes = 0;
  int64_t synchronizations = 0;
};

TransferCounters transfer_counters();
void reset_transfer_counters();

/// Copies bytes between two devices through the right backend and counts it. Copies within one CPU device are
/// plain memcpy and not counted; between two virtual CPU devices they count as device-to-device. `blocking` waits for the copy (and counts a synchronisation when a GPU is involved).
/// `stream` is one of the GPU side's, between two GPUs one of the source's; ordering the copy with other streams is
/// the caller's part (Note [Copies between two GPUs] in tensor/copy.cpp).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes,
                NativeStream stream, bool blocking);

/// Every host-blocking wait on a device calls this: it counts the synchronisation and, with STRATA_SYNC_DEBUG
/// (sync_debug.h), warns on stderr or throws SyncDebugError naming `what`. Waits on the CPU device are not counted.
void note_synchronization(Device device, const char* what);

}  // namespace strata
