// strata._C.data: datasets and the DataLoader. Reading files and preparing batches run without the GIL.
#include <memory>
#include <string>

#include "bindings.h"

namespace strata::python {
namespace {

/// A Python iterator over one epoch of a DataLoader; it keeps the loader alive (keep_alive on __iter__).
struct Epoch {
  data::DataLoader* loader;
  std::optional<data::DataLoader::Iterator> at;
};

}  // namespace

void register_data(py::module_& m) {
  using namespace data;
  py::module_ d = m.def_submodule("data", "Datasets and the DataLoader.");
  py::class_<Dataset, std::shared_ptr<Dataset>>(d, "Dataset")
      .def("__len__", &Dataset::size)
      .def("__getitem__", [](const Dataset& ds, int64_t i) {
        if (i < 0) i += ds.size();
        STRATA_CHECK(i >= 0 && i < ds.size(), IndexError, "dataset index {} is out of range for {} examples", i,
                     ds.size());
        Example e = ds.get(i);
        return py::make_tuple(e.data, e.target);
      });
  py::class_<TensorDataset, Dataset, std::shared_ptr<TensorDataset>>(d, "TensorDataset")
      .def(py::init<Tensor, Tensor>(), py::arg("data"), py::arg("target"))
      .def_property_readonly("data", &TensorDataset::data)
      .def_property_readonly("targets", &TensorDataset::target);
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
  py::class_<Epoch>(d, "_Epoch").def("__iter__", [](py::object self) { return self; }).def("__next__", [](Epoch& e) {
    without_gil([&] {
      if (!e.at) {
        e.at = e.loader->begin();
      } else if (*e.at != e.loader->end()) {
        ++*e.at;
      }
    });
    if (*e.at == e.loader->end()) throw py::stop_iteration();
    return py::make_tuple((*e.at)->data, (*e.at)->target);
  });
  py::class_<DataLoader, std::shared_ptr<DataLoader>>(d, "DataLoader")
      .def(py::init([](std::shared_ptr<Dataset> dataset, int64_t batch_size, bool shuffle, uint64_t seed,
                       bool drop_last, int64_t prefetch, bool pin_memory, py::object device, bool non_blocking) {
             DataLoaderOptions o;
             o.batch_size = batch_size;
             o.shuffle = shuffle;
             o.seed = seed;
             o.drop_last = drop_last;
             o.prefetch = prefetch;
             o.pin_memory = pin_memory;
             o.device = to_device(device);
             o.non_blocking = non_blocking;
             return std::make_shared<DataLoader>(std::move(dataset), o);
           }),
           py::arg("dataset"), py::arg("batch_size") = 1, py::arg("shuffle") = false, py::arg("seed") = 0,
           py::arg("drop_last") = false, py::arg("prefetch") = 0, py::arg("pin_memory") = false,
           py::arg("device") = py::none(), py::arg("non_blocking") = true,
           "Batches of (data, target); u8 data arrives as f32 in [0, 1]. A shuffled order depends on (seed, epoch) "
           "only.")
      .def("__len__", &DataLoader::size)
      .def("set_epoch", &DataLoader::set_epoch, py::arg("epoch"))
      .def(
          "__iter__",
          [](DataLoader& l) {
            return Epoch{&l, std::nullopt};
          },
          py::keep_alive<0, 1>());
}

}  // namespace strata::python
