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
// memory), so reading them after a synchronisation costs no copy. The slot is checked at every synchronisation of
// its device (Stream::synchronize, synchronize, blocking copies such as item() and to(cpu)) and, with
// STRATA_LAUNCH_BLOCKING=1, right after each launch; CPU kernels run eagerly and are checked when they return.

/// The per-stream error slot a kernel writes to. Plain data so device code can write it.
struct DeviceAssertSlot {
  unsigned int failed;
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

/// Registers (once per distinct kernel, op, message and call site) what a failure at this site means.
int register_assert_site(const char* kernel, const char* op, const char* message, std::source_location where);

/// The error slot of a stream (created on first use).
DeviceAssertSlot* assert_slot(Device device, NativeStream stream);

/// Throws DeviceAssertError for the first recorded failure on any stream of `device`, and clears the slots.
void check_device_asserts(Device device);

/// STRATA_LAUNCH_BLOCKING=1: synchronise after every launch so errors surface at their call site.
bool launch_blocking();

}  // namespace strata
