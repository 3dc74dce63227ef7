#pragma once

// Process groups over a device vendor's collective library (NCCL for CUDA): the plugin of a device type registers the
// library (runtime/collectives.h), and dist builds a ProcessGroup for that type's tensors on top of it
// (Note [Collectives on devices] in device_group.cpp).

#include <memory>
#include <string>

#include "strata/core/device.h"
#include "strata/dist/process_group.h"
#include "strata/runtime/collectives.h"

namespace strata::dist {

// The interfaces a plugin implements live in runtime/collectives.h; dist names them as it always has.
using strata::collective_library;
using strata::CollectiveLibrary;
using strata::DeviceCommunicator;
using strata::register_collective_library;

/// A group for tensors of `type` over the same ranks as `bootstrap`, through the library registered for `type`. The
/// bootstrap group (MPI, or a world of one) carries the group's identifier and each collective's agreement check;
/// it must outlive the group. nullptr with a reason when no library is registered or it cannot be used.
std::shared_ptr<ProcessGroup> make_device_group(ProcessGroup& bootstrap, DeviceType type,
                                                const ProcessGroupOptions& options, std::string* why_not);

namespace detail {
/// The world of several ranks: collectives go to `host` (MPI) or to the group of their tensors' device (Note [The
/// world's groups] in device_group.cpp).
std::shared_ptr<ProcessGroup> make_world_group(std::shared_ptr<ProcessGroup> host, const ProcessGroupOptions& options);
}  // namespace detail

}  // namespace strata::dist
