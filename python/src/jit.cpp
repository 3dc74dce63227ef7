// strata.RawKernel: kernels in CUDA's dialect, compiled at run time (strata/jit/jit.h), called as CuPy's are.

#include "strata/jit/jit.h"

#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.h"

namespace strata::python {

namespace {

/// A grid or block: an int, or a tuple of one to three ints, each from 1 to 2^32 - 1.
jit::Dim3 to_dim3(py::handle value, const char* what) {
  std::vector<int64_t> sizes;
  if (py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) {
    const auto items = py::reinterpret_borrow<py::sequence>(value);
    if (items.size() < 1 || items.size() > 3) {
      throw TypeError(fmt::format("{}: expected an int or a tuple of 1 to 3 ints, got a {} of {}", what,
                                  type_name(value), items.size()));
    }
    for (py::handle item : items) sizes.push_back(to_int(item, what));
  } else {
    sizes.push_back(to_int(value, what));
  }
  for (int64_t s : sizes) {
    STRATA_CHECK(s >= 1 && s <= std::numeric_limits<unsigned>::max(), InvalidArgumentError,
                 "{}: every size must be from 1 to {}, got {}", what, std::numeric_limits<unsigned>::max(), s);
  }
  sizes.resize(3, 1);
  return {static_cast<unsigned>(sizes[0]), static_cast<unsigned>(sizes[1]), static_cast<unsigned>(sizes[2])};
}

jit::KernelArg to_kernel_arg(py::handle value, std::size_t i) {
  if (py::isinstance<Tensor>(value)) return jit::KernelArg(value.cast<Tensor>());
  if (PyBool_Check(value.ptr())) return jit::KernelArg(Scalar(value.cast<bool>()));
  if (PyFloat_Check(value.ptr())) return jit::KernelArg(Scalar(value.cast<double>()));
  if (PyLong_Check(value.ptr()) || py::hasattr(value, "__index__")) {
    return jit::KernelArg(Scalar(to_int(value, "RawKernel argument")));
  }
  if (py::isinstance<py::array>(value)) {
    throw TypeError(
        fmt::format("RawKernel: argument {} is a NumPy array; strata.RawKernel takes those (this is its "
                    "compiled base)",
                    i));
  }
  if (py::hasattr(value, "__float__")) {
    return jit::KernelArg(Scalar(py::float_(py::reinterpret_borrow<py::object>(value)).cast<double>()));
  }
  throw TypeError(fmt::format("RawKernel: argument {} is a {}; a kernel takes tensors, NumPy arrays and numbers", i,
                              type_name(value)));
}

}  // namespace

void register_jit(py::module_& m) {
  py::class_<jit::RawKernel>(m, "RawKernel", py::dynamic_attr(),
                             "A kernel in CUDA's dialect, compiled at its first launch on each device.")
      .def(py::init([](std::string code, std::string name, std::vector<std::string> options, bool cache) {
             return jit::RawKernel(std::move(code), std::move(name), std::move(options), cache);
           }),
           py::arg("code"), py::arg("name"), py::arg("options") = std::vector<std::string>{}, py::arg("cache") = true)
      .def(
          "__call__",
          [](const jit::RawKernel& k, py::handle grid, py::handle block, py::handle args, int64_t shared_mem) {
            const jit::Dim3 g = to_dim3(grid, "RawKernel grid"), b = to_dim3(block, "RawKernel block");
            if (!py::isinstance<py::tuple>(args) && !py::isinstance<py::list>(args)) {
              throw TypeError(fmt::format("RawKernel: args must be a tuple or a list, not {}", type_name(args)));
            }
            STRATA_CHECK(shared_mem >= 0, InvalidArgumentError, "RawKernel: shared_mem must be >= 0, got {}",
                         shared_mem);
            std::vector<jit::KernelArg> converted;
            std::size_t i = 0;
            for (py::handle a : py::reinterpret_borrow<py::sequence>(args)) converted.push_back(to_kernel_arg(a, i++));
            without_gil([&] { k(g, b, converted, static_cast<std::size_t>(shared_mem)); });
          },
          py::arg("grid"), py::arg("block"), py::arg("args"), py::arg("shared_mem") = 0)
      .def(
          "compile",
          [](const jit::RawKernel& k, py::handle device) {
            const Device d = to_device(device);
            without_gil([&] { k.compile_for(d); });
          },
          py::arg("device") = py::none(), "Compiles for a device now, so that the first launch does not wait.")
      .def_property_readonly("name", &jit::RawKernel::name)
      .def_property_readonly(
          "params",
          [](const jit::RawKernel& k) {
            py::list out;
            for (const jit::KernelParam& p : k.declaration().params) {
              out.append(py::make_tuple(p.name, p.type, p.pointer, p.is_const));
            }
            return out;
          },
          "(name, type, is_pointer, is_const) of each parameter, as declared.");
  m.def(
      "_jit_compile",
      [](const std::string& code, const std::string& target, const std::vector<std::string>& options) {
        const jit::Target t = jit::Target::parse(target);
        jit::Compiled c = without_gil([&] { return jit::compile(code, t, options); });
        return py::make_tuple(py::bytes(c.binary), c.log, c.from_cache);
      },
      py::arg("code"), py::arg("target"), py::arg("options") = std::vector<std::string>{});
  m.def("_jit_cache_stats", [] {
    const jit::CacheStats s = jit::cache_stats();
    py::dict d;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    d["discarded"] = s.discarded;
    return d;
  });
  m.def("_jit_cache_folder", [] { return jit::cache_folder(); });
}

}  // namespace strata::python
