#pragma once

#include <cstdint>
#include <source_location>

#include "strata/core/device.h"
#include "strata/runtime/backend.h"

namespace strata {

// Note [Device-side asserts]
// A failing STRATA_KERNEL_ASSERT writes the first failure (its launch site, the element index, the bad value and
// the valid bound) into the error slot of the stream it runs on; later failures see the slot taken and do nothing,
// so identical failures collapse into one report. Slots live in host memory that the GPU can write (mapped pinned
// memory), so reading them after a synchronisation costs no copy. A synchronisation checks the slots of the work it
// waited for, and only those: Stream::synchronize, Event::synchronize and blocking copies (item(), to(cpu)) the slot
// of their stream, synchronize(device) every slot of the device; with STRATA_LAUNCH_BLOCKING=1 the launch's stream
// is synchronised and checked right after each launch; CPU kernels run eagerly and are checked when they return.
// Reading another stream's slot would race kernels still running there, and report a failure before the work that
// made it is known to be finished. The slot's state goes free -> writing -> recorded, and the host reads and clears
// only a recorded one, so a kernel still writing (a later launch on the same stream) is never seen half-written.

/// DeviceAssertSlot::failed: free, taken by a failing thread still writing the fields, or holding a complete report.
enum DeviceAssertState : unsigned int { kAssertSlotFree = 0, kAssertSlotWriting = 1, kAssertSlotRecorded = 2 };

/// The per-stream error slot a kernel writes to. Plain data so device code can write it.
struct DeviceAssertSlot {
  unsigned int failed;  // a DeviceAssertState
  int site;
  int64_t index;
  double value;
  double bound;
};

/// What a kernel carries to report an assert: trivially copyable, captured by value into the kernel.
struct KernelAssertContext {
  DeviceAssertSlot* slot;
  int site;
};

/// Registers (once per distinct kernel, op, message and call site) what a failure at this site means, and returns
/// its id; a site seen before is found without a lock (Note [Assert sites and slots without a lock]).
int register_assert_site(const char* kernel, const char* op, const char* message, std::source_location where);

/// The error slot of a stream (created on first use; later found without a lock).
DeviceAssertSlot* assert_slot(Device device, NativeStream stream);

/// After `stream` of `device` was synchronised: throws DeviceAssertError for the failure recorded in its slot, and
/// clears the slot; the slots of other streams are left alone.
void check_stream_asserts(Device device, NativeStream stream);

/// After all of `device` was synchronised: throws DeviceAssertError for the first failure recorded on any of its
/// streams, and clears that slot (the others report at the next check).
void check_device_asserts(Device device);

/// STRATA_LAUNCH_BLOCKING=1: synchronise after every launch so errors surface at their call site. A switch (1, true,
/// yes, on / 0, false, no, off); any other value throws InvalidArgumentError (Note [Strata's environment variables]).
bool launch_blocking();

}  // namespace strata
