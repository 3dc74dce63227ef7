// strata._C.data: the C++ datasets and DataLoader, and the draws that order an epoch; strata.Generator. Reading
// files and preparing batches run without the GIL. The PyTorch-shaped classes users meet are Python's
// (python/strata/utils/data), over these.
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "bindings.h"
#include "strata/data/sampling.h"

namespace strata::python {
namespace {

/// A Python iterator over one iteration of a C++ DataLoader: independent of the loader's other iterations. One
/// Python iterator shared between threads is advanced by one of them at a time.
struct Iteration {
  std::shared_ptr<data::DataLoader> loader;  // kept for the iteration's settings; the iteration keeps its data
  std::optional<data::DataLoader::Iterator> at;
  std::mutex mutex;
};

py::tuple next_batch(Iteration& it) {
  bool done = false;
  data::Batch batch;
  without_gil([&] {
    std::lock_guard lock(it.mutex);
    if (!it.at) {
      it.at = it.loader->begin();
    } else if (*it.at != it.loader->end()) {
      ++*it.at;
    }
    done = *it.at == it.loader->end();
    if (!done) batch = **it.at;
  });
  if (done) throw py::stop_iteration();
  return py::make_tuple(batch.data, batch.target);
}

Generator& generator_or_default(Generator* generator) {
  return generator != nullptr ? *generator : default_generator(kCPU);
}

// strata.Generator: PyTorch's torch.Generator for the CPU (Generator in strata/tensor/random.h).
void register_generator(py::module_& m) {
  py::class_<Generator>(m, "Generator", "A random number generator; pass it as generator= to samplers and splits.")
      .def(py::init([](py::object device) {
             const Device d = to_device(device);
             STRATA_CHECK(d.is_cpu(), NotImplementedError,
                          "Generator(device='{}'): only CPU generators exist; strata.manual_seed seeds every device's",
                          d);
             return std::make_unique<Generator>();
           }),
           py::arg("device") = "cpu")
      .def(
          "manual_seed",
          [](Generator& g, py::int_ seed) -> Generator& {
            // PyTorch takes any int that fits 64 bits, negative ones as their two's complement.
            g.manual_seed(PyLong_AsUnsignedLongLongMask(seed.ptr()));
            return g;
          },
          py::arg("seed"), py::return_value_policy::reference_internal)
      .def("initial_seed", &Generator::seed)
      .def("seed",
           [](Generator& g) {
             const uint64_t seed = (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
             g.manual_seed(seed);
             return seed;
           })
      .def("get_state",
           [](const Generator& g) {
             const GeneratorState s = g.state();
             return py::make_tuple(s.seed, s.offset);
           })
      .def(
          "set_state",
          [](Generator& g, std::pair<uint64_t, uint64_t> state) {
            g.set_state({state.first, state.second});
          },
          py::arg("state"))
      .def_property_readonly("device", [](const Generator&) { return Device(kCPU); });
}

}  // namespace

void register_data(py::module_& m) {
  using namespace data;
  register_generator(m);
  py::module_ d = m.def_submodule("data", "Datasets and the DataLoader in C++.");
  d.def(
      "draw_seed", [](Generator* generator) { return draw_seed(generator_or_default(generator)); },
      py::arg("generator") = nullptr, "A seed for one shuffled order, drawn from the generator (default: the CPU's).");
  d.def(
      "permutation",
      [](int64_t n, uint64_t seed, uint64_t epoch) {
        STRATA_CHECK(n >= 0, InvalidArgumentError, "permutation: n must be non-negative, got {}", n);
        return without_gil([&] { return permutation(n, seed, epoch); });
      },
      py::arg("n"), py::arg("seed"), py::arg("epoch") = 0, "0..n-1 in an order that depends on (seed, epoch) only.");
  d.def(
      "uniform_indices",
      [](int64_t n, int64_t count, uint64_t seed) {
        STRATA_CHECK(n > 0 && count >= 0, InvalidArgumentError,
                     "uniform_indices: n must be positive and count non-negative, got {} and {}", n, count);
        std::mt19937_64 rng = make_generator(seed);
        std::vector<int64_t> out(static_cast<std::size_t>(count));
        for (int64_t& i : out) i = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(n)));
        return out;
      },
      py::arg("n"), py::arg("count"), py::arg("seed"), "`count` indices uniform in [0, n), from `seed` only.");
  py::class_<Dataset, std::shared_ptr<Dataset>>(d, "Dataset")
      .def("__len__", &Dataset::size)
      .def("__getitem__",
           [](const Dataset& ds, int64_t i) {
             if (i < 0) i += ds.size();
             STRATA_CHECK(i >= 0 && i < ds.size(), IndexError, "dataset index {} is out of range for {} examples", i,
                          ds.size());
             Example e = ds.get(i);
             return py::make_tuple(e.data, e.target);
           })
      .def(
          "get_batch",
          [](const Dataset& ds, std::vector<int64_t> indices) {
            STRATA_CHECK(!indices.empty(), InvalidArgumentError, "get_batch: no indices");
            Example e = without_gil([&] { return ds.get_batch(tensor(indices)); });
            return py::make_tuple(e.data, e.target);
          },
          py::arg("indices"), "The examples at `indices`, stacked: one gather for datasets held in memory.");
  py::class_<TensorDataset, Dataset, std::shared_ptr<TensorDataset>>(d, "TensorDataset")
      .def(py::init<Tensor, Tensor>(), py::arg("data"), py::arg("target"))
      .def_property_readonly("data", [](const TensorDataset& ds) { return ds.data(); })
      .def_property_readonly("targets", [](const TensorDataset& ds) { return ds.target(); });
  py::class_<Subset, Dataset, std::shared_ptr<Subset>>(d, "Subset")
      .def(py::init<std::shared_ptr<const Dataset>, std::vector<int64_t>>(), py::arg("dataset"), py::arg("indices"));
  py::class_<FashionMnist, TensorDataset, std::shared_ptr<FashionMnist>>(d, "FashionMNIST")
      .def(py::init([](const std::string& root, bool train) {
             return without_gil(
                 [&] { return std::make_shared<FashionMnist>(root, train ? Split::Train : Split::Test); });
           }),
           py::arg("root") = std::string(kFashionMnistDir), py::arg("train") = true,
           "Fashion-MNIST from `root` (Debian's dataset-fashion-mnist by default): u8 images [N, 28, 28], i64 "
           "labels.")
      .def_property_readonly_static("classes", [](py::object) {
        std::vector<std::string> names(FashionMnist::kClassNames.begin(), FashionMnist::kClassNames.end());
        return names;
      });
  py::class_<Iteration>(d, "_Iteration")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &next_batch);
  py::class_<DataLoader, std::shared_ptr<DataLoader>>(d, "DataLoader")
      .def(py::init([](std::shared_ptr<Dataset> dataset, int64_t batch_size, bool shuffle, uint64_t seed,
                       bool drop_last, int64_t prefetch, bool pin_memory, py::object device, bool non_blocking,
                       bool scale_bytes) {
             DataLoaderOptions o;
             o.batch_size = batch_size;
             o.shuffle = shuffle;
             o.seed = seed;
             o.drop_last = drop_last;
             o.prefetch = prefetch;
             o.pin_memory = pin_memory;
             o.device = to_device(device);
             o.non_blocking = non_blocking;
             o.scale_bytes = scale_bytes;
             return std::make_shared<DataLoader>(std::move(dataset), o);
           }),
           py::arg("dataset"), py::arg("batch_size") = 1, py::arg("shuffle") = false, py::arg("seed") = 0,
           py::arg("drop_last") = false, py::arg("prefetch") = 0, py::arg("pin_memory") = false,
           py::arg("device") = py::none(), py::arg("non_blocking") = true, py::arg("scale_bytes") = false,
           "Batches of (data, target) of a C++ dataset, in an order that depends on (seed, epoch) only.")
      .def("__len__", &DataLoader::size)
      .def("set_epoch", &DataLoader::set_epoch, py::arg("epoch"))
      .def_property_readonly("epoch", &DataLoader::epoch)
      .def("__iter__", [](std::shared_ptr<DataLoader> l) {
        auto it = std::make_unique<Iteration>();
        it->loader = std::move(l);
        return it;
      });
}

}  // namespace strata::python
