// strata._C.SummaryWriter: the C++ writer of TensorBoard event files (strata/io/summary_writer.h). The class users
// meet is Python's, strata.utils.tensorboard.SummaryWriter, which turns PyTorch's arguments (numbers of any kind,
// 0-d tensors, NumPy arrays) into these.
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "bindings.h"
#include "strata/io/summary_writer.h"

namespace strata::python {

void register_tensorboard(py::module_& m) {
  py::class_<SummaryWriter>(m, "_SummaryWriter",
                            "TensorBoard event files in a directory; see strata.utils.tensorboard.")
      .def(py::init([](const std::string& log_dir, const std::string& suffix) {
             return std::make_unique<SummaryWriter>(log_dir, suffix);
           }),
           py::arg("log_dir"), py::arg("filename_suffix") = "")
      .def("add_scalar", &SummaryWriter::add_scalar, py::arg("tag"), py::arg("value"), py::arg("step"),
           py::arg("walltime") = py::none())
      .def("add_scalars", &SummaryWriter::add_scalars, py::arg("main_tag"), py::arg("values"), py::arg("step"),
           py::arg("walltime") = py::none())
      .def(
          "add_histogram",
          [](SummaryWriter& w, const std::string& tag, const Tensor& values, int64_t step, py::object bins,
             std::optional<double> walltime) {
            if (py::isinstance<py::str>(bins)) {
              const std::string name = bins.cast<std::string>();
              without_gil([&] { w.add_histogram(tag, values, step, name, walltime); });
            } else {
              const int64_t count = bins.cast<int64_t>();
              without_gil([&] { w.add_histogram(tag, values, step, count, walltime); });
            }
          },
          py::arg("tag"), py::arg("values"), py::arg("step"), py::arg("bins"), py::arg("walltime") = py::none())
      .def("flush", [](SummaryWriter& w) { without_gil([&] { w.flush(); }); })
      .def("close", &SummaryWriter::close)
      .def_property_readonly("log_dir", [](const SummaryWriter& w) { return w.log_dir().string(); })
      .def_property_readonly("file", [](const SummaryWriter& w) { return w.file().string(); });
}

}  // namespace strata::python
