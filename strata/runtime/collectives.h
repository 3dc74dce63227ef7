#pragma once

// The seam between a device type's plugin and its vendor's collective library (NCCL for CUDA): the plugin registers
// the library here, in runtime/, which plugins may include, and strata/dist builds a ProcessGroup for that type's
// tensors on top of it (dist/device_collectives.h; Note [Collectives on devices] in dist/device_group.cpp). A plugin
// never includes dist/: the layers above runtime/ are its callers, not its dependencies.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/device.h"
#include "strata/core/dtype.h"
#include "strata/runtime/backend.h"

namespace strata {

/// How a collective combines the ranks' values (dist::ReduceOp names the same type).
enum class ReduceOp { Sum, Avg, Min, Max };

/// One rank's connection to the others on one device. Each call queues the operation on `stream` and returns: the
/// data moves when the stream gets to it. Errors in queueing are thrown (DistributedError); errors met later, while
/// the operation runs, are reported by async_error().
class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  /// In place when send == recv. Avg is the library's own average.
  virtual void all_reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op,
                          NativeStream stream) = 0;
  virtual void broadcast(void* data, int64_t count, DType dtype, int root, NativeStream stream) = 0;
  /// recv holds size() * count elements, rank r's at r * count.
  virtual void all_gather(const void* send, void* recv, int64_t count, DType dtype, NativeStream stream) = 0;
  /// send holds size() * count elements; recv gets the reduction of row rank().
  virtual void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op,
                              NativeStream stream) = 0;
  /// The first error met asynchronously, in one line; empty when there is none.
  virtual std::string async_error() = 0;
  /// Ends every operation in flight, so that the streams they were queued on drain (after a timeout). The
  /// communicator is unusable afterwards.
  virtual void abort() noexcept = 0;
};

/// A device type's collective library, registered by its plugin.
class CollectiveLibrary {
 public:
  virtual ~CollectiveLibrary() = default;
  /// "nccl".
  virtual std::string name() const = 0;
  /// False, with a one-line reason, when the library cannot be used here (not installed, too old).
  virtual bool available(std::string* why_not) = 0;
  /// Whether the library moves tensors of this dtype.
  virtual bool supports(DType dtype) const = 0;
  /// An identifier for a new group of ranks, made on one rank and passed to the others.
  virtual std::vector<uint8_t> new_group_id() = 0;
  /// Joins the group `id` as `rank` of `size`, on device `index`; every rank of the group calls it at once.
  virtual std::unique_ptr<DeviceCommunicator> connect(const std::vector<uint8_t>& id, int rank, int size,
                                                      int index) = 0;
};

/// Installs the collective library for a device type's tensors, replacing any earlier one (the plugin calls it when
/// it loads; tests may install their own).
void register_collective_library(DeviceType type, std::shared_ptr<CollectiveLibrary> library);
/// The library registered for a device type, or nullptr.
std::shared_ptr<CollectiveLibrary> collective_library(DeviceType type);

}  // namespace strata
