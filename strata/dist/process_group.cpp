// The world of one, the launcher's environment, and dist::init().
#include "strata/dist/process_group.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "strata/core/error.h"
#include "strata/dist/device_collectives.h"
#include "strata/runtime/environment.h"
#include "strata/runtime/parallel.h"
#include "strata/runtime/registry.h"

namespace strata::dist {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
  }
  return "unknown";
}

namespace {

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

class LocalGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend_name() const override { return "local"; }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op) override {
    STRATA_CHECK(tensor.defined(), InvalidArgumentError, "all_reduce: the tensor is undefined");
    STRATA_CHECK(op != ReduceOp::Avg || is_floating(tensor.dtype()), DTypeError,
                 "all_reduce: avg needs a floating dtype, not {}", tensor.dtype());
    return done();
  }
  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override {
    STRATA_CHECK(tensor.defined(), InvalidArgumentError, "broadcast: the tensor is undefined");
    STRATA_CHECK(root == 0, InvalidArgumentError, "broadcast: root {} is not a rank of a world of one", root);
    return done();
  }
  std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) override {
    detail::check_gathered("all_gather", output, input, 1);
    output.select(0, 0).copy_(input);
    return done();
  }
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input, ReduceOp) override {
    detail::check_gathered("reduce_scatter", input, output, 1);
    output.copy_(input.select(0, 0));
    return done();
  }
  std::shared_ptr<Work> barrier() override { return done(); }

 private:
  static std::shared_ptr<Work> done() { return std::make_shared<DoneWork>(); }
};

// The value of an integer variable, or std::nullopt when it is not set.
std::optional<int> env_int(const char* name, int min) {
  const std::optional<std::string> text = environment_value(name);  // Note [Strata's environment variables]
  if (!text) return std::nullopt;
  const std::string_view s(*text);
  int value = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  STRATA_CHECK(!s.empty() && ec == std::errc() && ptr == s.data() + s.size() && value >= min, InvalidArgumentError,
               "{}='{}' is not valid: expected a whole number >= {}", name, s, min);
  return value;
}

// A switch variable: std::nullopt when it is not set.
std::optional<bool> env_switch(const char* name) {
  const std::optional<std::string> text = environment_value(name);  // Note [Strata's environment variables]
  if (!text) return std::nullopt;
  return environment_switch(name, *text);
}

struct World {
  std::mutex mutex;
  std::shared_ptr<ProcessGroup> group;
  ProcessGroupOptions options;  // what it was built with, the environment applied
};

World& the_world() {
  static World* const world = new World();  // never destroyed: see Note [The MPI world ends at exit] in mpi_group.cpp
  return *world;
}

}  // namespace

void detail::check_gathered(const char* op, const Tensor& big, const Tensor& small, int world_size) {
  STRATA_CHECK(big.defined() && small.defined(), InvalidArgumentError, "{}: a tensor is undefined", op);
  STRATA_CHECK(big.dim() == small.dim() + 1 && big.size(0) == world_size && big.numel() == small.numel() * world_size &&
                   big.dtype() == small.dtype() && big.device() == small.device(),
               ShapeError, "{}: the larger tensor must be [{}, *{}] {} on {} (the world size first), not {} {} on {}",
               op, world_size, small.shape(), small.dtype(), small.device(), big.shape(), big.dtype(), big.device());
}

void detail::check_reducible(const char* op, const Tensor& t, ReduceOp reduce) {
  STRATA_CHECK(t.dtype() != DType::Bool, DTypeError, "{}: bool tensors cannot be reduced", op);
  STRATA_CHECK(reduce != ReduceOp::Avg || is_floating(t.dtype()), DTypeError, "{}: avg needs a floating dtype, not {}",
               op, t.dtype());
}

std::string detail::timeout_message(const std::string& what, std::chrono::milliseconds timeout) {
  return fmt::format(
      "{} did not finish within {} s; another rank may have died, or issued other collectives in "
      "another order (STRATA_DIST_TIMEOUT sets the timeout in seconds)",
      what, std::chrono::duration<double>(timeout).count());
}

std::shared_ptr<ProcessGroup> make_local_group() { return std::make_shared<LocalGroup>(); }

LaunchInfo launch_info() {
  LaunchInfo info;
  if (const auto size = env_int("OMPI_COMM_WORLD_SIZE", 1)) {
    info.launcher = "mpirun";
    info.size = *size;
    info.rank = env_int("OMPI_COMM_WORLD_RANK", 0).value_or(0);
    info.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0).value_or(0);
    info.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1).value_or(1);
  } else if (const auto world_size = env_int("WORLD_SIZE", 1)) {
    info.launcher = "torchrun";
    info.size = *world_size;
    info.rank = env_int("RANK", 0).value_or(0);
    info.local_rank = env_int("LOCAL_RANK", 0).value_or(0);
    info.local_size = env_int("LOCAL_WORLD_SIZE", 1).value_or(1);
  }
  STRATA_CHECK(info.rank < info.size, InvalidArgumentError, "the launcher gave rank {} in a world of {}", info.rank,
               info.size);
  return info;
}

ProcessGroup& init() {
  {
    World& w = the_world();
    std::lock_guard lock(w.mutex);
    if (w.group) return *w.group;
  }
  return init(ProcessGroupOptions{});
}

ProcessGroup& init(const ProcessGroupOptions& requested) {
  World& w = the_world();
  std::lock_guard lock(w.mutex);
  ProcessGroupOptions options = requested;
  if (const auto seconds = env_int("STRATA_DIST_TIMEOUT", 1)) options.timeout = std::chrono::seconds(*seconds);
  if (env_switch("STRATA_DIST_STAGE_THROUGH_HOST").value_or(false) ||
      env_switch("STRATA_DIST_STAGE_DEVICE_TENSORS").value_or(false)) {
    options.stage_through_host = true;  // Note [Nothing staged behind the caller's back]
  }
  if (w.group) {
    STRATA_CHECK(options.timeout == w.options.timeout && options.stage_through_host == w.options.stage_through_host,
                 InvalidArgumentError,
                 "dist::init: the world was built with a timeout of {} s and stage_through_host={}; it cannot be "
                 "built again with {} s and {}",
                 std::chrono::duration<double>(w.options.timeout).count(), w.options.stage_through_host,
                 std::chrono::duration<double>(options.timeout).count(), options.stage_through_host);
    return *w.group;
  }
  const LaunchInfo info = launch_info();
  if (info.launcher == "mpirun") {
    std::string why;
    auto group = make_mpi_group(options, &why);
    STRATA_CHECK(group != nullptr || info.size == 1, DistributedError,
                 "dist::init: launched by mpirun with {} ranks, but {}", info.size, why);
    w.group = group ? detail::make_world_group(group, options) : make_local_group();
  } else if (info.launcher == "torchrun" && info.size > 1) {
    STRATA_THROW(NotImplementedError,
                 "dist::init: WORLD_SIZE={} without mpirun: Strata's transport between processes is MPI, and it has "
                 "no rendezvous store of its own; launch with `mpirun -np {} ...`",
                 info.size, info.size);
  } else {
    w.group = make_local_group();
  }
  w.options = options;
  if (info.local_size > 1 && std::getenv("OMP_NUM_THREADS") == nullptr) {
    set_num_threads(std::max(1, num_threads() / info.local_size));
  }
  return *w.group;
}

ProcessGroup& world() { return init(); }

bool is_initialized() {
  World& w = the_world();
  std::lock_guard lock(w.mutex);
  return w.group != nullptr;
}

Device local_device() {
  // The first device type, in the enum's order, with a device; cuda before hip.
  for (int t = 0; t < kDeviceTypeCount; ++t) {
    const auto type = static_cast<DeviceType>(t);
    if (type == DeviceType::CPU) continue;
    if (const int gpus = device_count(type); gpus > 0) return Device(type, launch_info().local_rank % gpus);
  }
  return kCPU;
}

}  // namespace strata::dist
