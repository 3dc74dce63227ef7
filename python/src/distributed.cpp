// strata._C._distributed: the world's collectives under PyTorch's names (python/strata/distributed.py), the gradient
// reducer of strata.nn.parallel.DistributedDataParallel, and the shards of strata.utils.data.DistributedSampler.
#include <optional>
#include <vector>

#include "bindings.h"
#include "strata/data/distributed_sampler.h"
#include "strata/dist/ddp.h"
#include "strata/dist/process_group.h"

namespace strata::python {

namespace {

// The world lives until the process exits (Note [The MPI world ends at exit]): Python holds it by reference.
dist::ProcessGroup& build_world(std::optional<double> timeout_seconds, bool stage_through_host) {
  dist::ProcessGroupOptions options;
  if (timeout_seconds) {
    STRATA_CHECK(*timeout_seconds > 0, InvalidArgumentError,
                 "init_process_group: the timeout must be positive, not {} s", *timeout_seconds);
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout_seconds * 1000));
  }
  options.stage_through_host = stage_through_host;
  return without_gil([&]() -> dist::ProcessGroup& { return dist::init(options); });
}

void wait(dist::Work& work) {
  without_gil([&] { work.wait(); });
}

}  // namespace

void register_distributed(py::module_& m) {
  py::module_ d = m.def_submodule("_distributed", "Strata's process group, for strata.distributed");
  py::enum_<dist::ReduceOp>(d, "ReduceOp", "How a reduction combines the ranks' values (torch.distributed's names).")
      .value("SUM", dist::ReduceOp::Sum)
      .value("AVG", dist::ReduceOp::Avg)
      .value("MIN", dist::ReduceOp::Min)
      .value("MAX", dist::ReduceOp::Max);

  py::class_<dist::Work, std::shared_ptr<dist::Work>>(d, "Work", "A collective in flight (async_op=True).")
      .def(
          "wait",
          [](dist::Work& w) {
            wait(w);
            return true;
          },
          "Waits until the result is in the tensors; raises the collective's error, or CollectiveTimeoutError.")
      .def("is_completed", &dist::Work::is_completed, "Whether the result is in the tensors; never blocks.");

  py::class_<dist::ProcessGroup, std::unique_ptr<dist::ProcessGroup, py::nodelete>>(d, "ProcessGroup")
      .def("rank", &dist::ProcessGroup::rank)
      .def("size", &dist::ProcessGroup::size)
      .def("backend_name", &dist::ProcessGroup::backend_name)
      .def(
          "all_reduce", [](dist::ProcessGroup& g, Tensor t, dist::ReduceOp op) { return g.all_reduce(t, op); },
          py::arg("tensor"), py::arg("op"))
      .def(
          "broadcast", [](dist::ProcessGroup& g, Tensor t, int root) { return g.broadcast(t, root); },
          py::arg("tensor"), py::arg("root"))
      .def(
          "all_gather", [](dist::ProcessGroup& g, Tensor out, const Tensor& in) { return g.all_gather(out, in); },
          py::arg("output"), py::arg("input"))
      .def(
          "reduce_scatter",
          [](dist::ProcessGroup& g, Tensor out, const Tensor& in, dist::ReduceOp op) {
            return g.reduce_scatter(out, in, op);
          },
          py::arg("output"), py::arg("input"), py::arg("op"))
      .def("barrier", &dist::ProcessGroup::barrier);

  d.def("init", &build_world, py::arg("timeout_seconds"), py::arg("stage_through_host"),
        py::return_value_policy::reference, "Builds the world once (dist::init) and returns it.");
  d.def("is_initialized", &dist::is_initialized);
  d.def("launch_info", [] {
    const dist::LaunchInfo info = dist::launch_info();
    py::dict out;
    out["rank"] = info.rank;
    out["size"] = info.size;
    out["local_rank"] = info.local_rank;
    out["local_size"] = info.local_size;
    out["launcher"] = info.launcher;
    return out;
  });

  py::class_<dist::GradientReducer>(d, "GradientReducer",
                                    "Averages the gradients of `parameters` over the group during backward.")
      .def(py::init([](std::vector<Tensor> parameters, dist::ProcessGroup& group, std::size_t bucket_cap_bytes,
                       std::size_t first_bucket_cap_bytes, bool gradient_as_bucket_view) {
             dist::DdpOptions options;
             options.bucket_cap_bytes = bucket_cap_bytes;
             options.first_bucket_cap_bytes = first_bucket_cap_bytes;
             options.gradient_as_bucket_view = gradient_as_bucket_view;
             return std::make_unique<dist::GradientReducer>(std::move(parameters), group, options);
           }),
           py::arg("parameters"), py::arg("group"), py::arg("bucket_cap_bytes"), py::arg("first_bucket_cap_bytes"),
           py::arg("gradient_as_bucket_view"), py::keep_alive<1, 3>())
      .def("bucket_layout", &dist::GradientReducer::bucket_layout)
      .def_property("sync", &dist::GradientReducer::sync, &dist::GradientReducer::set_sync)
      .def_property_readonly("last_wait_seconds", &dist::GradientReducer::last_wait_seconds);

  d.def(
      "sampler_indices",
      [](int64_t size, int world_size, int rank, bool shuffle, uint64_t seed, bool drop_last, uint64_t epoch) {
        data::DistributedSampler sampler(size, world_size, rank, shuffle, seed, drop_last);
        sampler.set_epoch(epoch);
        return sampler.indices();
      },
      py::arg("size"), py::arg("world_size"), py::arg("rank"), py::arg("shuffle"), py::arg("seed"),
      py::arg("drop_last"), py::arg("epoch"),
      "One rank's indices for an epoch (Note [Sharding a dataset over ranks]).");
  d.def(
      "sampler_size",
      [](int64_t size, int world_size, int rank, bool drop_last) {
        return data::DistributedSampler(size, world_size, rank, false, 0, drop_last).size();
      },
      py::arg("size"), py::arg("world_size"), py::arg("rank"), py::arg("drop_last"));
}

}  // namespace strata::python
