#pragma once

// Collectives across processes (PyTorch's c10d, in C++): a ProcessGroup is the world of ranks a program runs in,
// and each collective returns a Work to wait on. dist::init() builds the world from the launcher's environment.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "strata/runtime/collectives.h"
#include "strata/tensor/tensor.h"

namespace strata::dist {

/// Sum, Avg, Min, Max: defined in runtime/collectives.h, which device plugins implement.
using ReduceOp = strata::ReduceOp;
std::string_view reduce_op_name(ReduceOp op);

/// A collective in flight. wait() rethrows its error, and throws CollectiveTimeoutError when the group's timeout
/// passes first. For host tensors it blocks until the collective has finished on this rank (the results are then in
/// the tensors); for device tensors moved by the device's library (NCCL) it makes the device's current stream wait
/// for the collective, without blocking the host, as c10d's NCCL work does (Note [Collectives on devices] in
/// device_group.cpp).
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  /// True once the result is in the caller's tensors (or the collective failed, which wait() then throws); never
  /// blocks. A staged tensor's result is copied back into it by the first call that sees the collective done.
  virtual bool is_completed() = 0;
};

/// Settings of a process group.
struct ProcessGroupOptions {
  /// How long a collective may take before wait() gives up with CollectiveTimeoutError naming the op, the rank and
  /// the sizes (STRATA_DIST_TIMEOUT, in seconds, overrides it in dist::init()).
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  /// Lets collectives move what MPI cannot take as it is through a copy in host memory (Note [Nothing staged
  /// behind the caller's back]): a device tensor whose device has no collective library (NCCL), and an f16 or bf16
  /// reduction (reduced as f32, then rounded back). Off, such a tensor is an error that says what to do.
  /// STRATA_DIST_STAGE_THROUGH_HOST=1 turns it on in dist::init(), as does STRATA_DIST_STAGE_DEVICE_TENSORS=1.
  bool stage_through_host = false;
};

// Note [Nothing staged behind the caller's back]
// MPI moves host memory, and reduces no 16-bit floats. A collective on a GPU tensor in a world without the GPU's
// collective library, or an f16/bf16 all_reduce or reduce_scatter, could still run through a host copy (and f32
// arithmetic), but that copy costs a device round trip or changes the rounding, unseen. So it is refused, on every
// rank before any communication, with an error naming the tensor and the two ways on: convert it yourself, or opt in
// with ProcessGroupOptions::stage_through_host. Broadcast and all_gather of f16/bf16 move the 16-bit values as they
// are: nothing is computed on them, so nothing is staged.

// Note [Collectives]
// Every rank calls the same collectives in the same order, with tensors of the same shape and dtype (all_gather's
// and reduce_scatter's larger side has the world size as its first dimension). Tensors are updated in place; they
// must stay alive and untouched until the Work completes. The world moves GPU tensors with NCCL; without it, and
// for f16/bf16 reductions, a tensor goes through host memory only when the options allow it (Note [Nothing staged
// behind the caller's back], Note [The world's groups] in device_group.cpp). Avg divides the sum by the world size
// (floating dtypes only). Before each collective the ranks compare what they were given, so a mismatch is a
// CollectiveMismatchError naming both sides on every rank rather than a hang or garbage (Note [Checking that ranks
// agree] in mpi_group.cpp says what it costs).
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi", "local" (a world of one), "nccl"; the world of several ranks adds the device groups it has made so far
  /// ("mpi+nccl").
  virtual std::string backend_name() const = 0;

  virtual std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) = 0;
  virtual std::shared_ptr<Work> broadcast(Tensor& tensor, int root) = 0;
  /// output: [size, *input.shape]; row r receives rank r's input.
  virtual std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) = 0;
  /// input: [size, *output.shape]; output receives the reduction over ranks of row `rank()`.
  virtual std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum) = 0;
  virtual std::shared_ptr<Work> barrier() = 0;
};

namespace detail {
/// The shapes all_gather and reduce_scatter take, for every backend: `big` is [world_size, *small.shape], of small's
/// dtype and device; ShapeError (or InvalidArgumentError for an undefined tensor) otherwise.
void check_gathered(const char* op, const Tensor& big, const Tensor& small, int world_size);
/// What every backend can reduce: not bool, and avg only for floating dtypes (DTypeError otherwise).
void check_reducible(const char* op, const Tensor& t, ReduceOp reduce);
/// The message of the CollectiveTimeoutError for `what` ("all_reduce of [4] f32 (sum) on rank 0 of 2") not finished
/// within `timeout`, the same for every backend.
std::string timeout_message(const std::string& what, std::chrono::milliseconds timeout);
}  // namespace detail

/// A world of one: every collective is the identity (Avg too) and completes at once. What a program gets without a
/// launcher, or in a build without MPI.
std::shared_ptr<ProcessGroup> make_local_group();

/// The MPI world (every rank of `mpirun`), or nullptr with a reason when this build has no MPI.
std::shared_ptr<ProcessGroup> make_mpi_group(const ProcessGroupOptions& options, std::string* why_not);

/// Where this process is, as the launcher says: Open MPI's OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK}, else torchrun's
/// RANK, WORLD_SIZE and LOCAL_RANK; a world of one without a launcher.
struct LaunchInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;    // ranks on this machine
  std::string launcher;  // "mpirun", "torchrun" or "" (none)
};
/// Reads the environment; malformed values are an InvalidArgumentError naming the variable.
LaunchInfo launch_info();

/// Builds the world once (later calls return the same group): MPI under mpirun, a world of one without a launcher.
/// With several ranks on one machine and OMP_NUM_THREADS unset, each rank's CPU pool gets its share of the cores
/// (cores / ranks on this machine, at least 1): ranks with a full pool each would run more threads than cores.
/// Under torchrun's variables alone with a world of more than one, throws NotImplementedError (Strata's transport is
/// MPI: launch with mpirun). Reads STRATA_DIST_TIMEOUT (seconds) and STRATA_DIST_STAGE_THROUGH_HOST when set.
ProcessGroup& init();
/// init() with these options (the environment's variables still override them). The world is built once: when it
/// has been, a call with other options than it was built with is an InvalidArgumentError (init() takes it as it is).
ProcessGroup& init(const ProcessGroupOptions& options);
/// The world built by init(); init() is called when it has not been.
ProcessGroup& world();
bool is_initialized();

/// The device this rank should use: cuda:LOCAL_RANK when there are GPUs (modulo their count; hip:LOCAL_RANK for AMD
/// GPUs when there is no CUDA one), else the CPU.
Device local_device();

}  // namespace strata::dist
