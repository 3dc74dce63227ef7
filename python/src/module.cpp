// The `strata._C` module: its entry point, dtypes and devices, grad mode, and the runtime's queries (CUDA, memory
// statistics and limits, transfer counters). The Python package `strata` re-exports these under PyTorch's names.
#include <string>

#include "bindings.h"

namespace pybind11::detail {

bool type_caster<strata::Scalar>::load(handle src, bool) {
  PyObject* o = src.ptr();
  if (PyBool_Check(o)) {
    value = strata::Scalar(o == Py_True);
    return true;
  }
  if (PyLong_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) return false;
    value = strata::Scalar(static_cast<int64_t>(v));
    return true;
  }
  if (PyFloat_Check(o)) {
    value = strata::Scalar(PyFloat_AsDouble(o));
    return true;
  }
  // NumPy scalars (np.float32(2), np.int64(3), np.bool_(True)) by their abstract types, without NumPy's C API.
  static PyObject* numpy_generic = [] {
    try {
      return object(module_::import("numpy").attr("generic")).release().ptr();
    } catch (const error_already_set&) {
      return static_cast<PyObject*>(nullptr);
    }
  }();
  if (numpy_generic == nullptr || PyObject_IsInstance(o, numpy_generic) != 1) return false;
  object kind = getattr(getattr(src, "dtype"), "kind");
  const std::string k = kind.cast<std::string>();
  if (k == "b")
    value = strata::Scalar(PyObject_IsTrue(o) == 1);
  else if (k == "i" || k == "u")
    value = strata::Scalar(static_cast<int64_t>(src.attr("__int__")().cast<long long>()));
  else if (k == "f")
    value = strata::Scalar(src.attr("__float__")().cast<double>());
  else
    return false;
  return true;
}

}  // namespace pybind11::detail

namespace strata::python {

Tensor scalar_like(const Scalar& value, const Tensor& like) {
  return scalar_tensor(value, TensorOptions().dtype(value.default_dtype()).device(like.device()));
}

namespace {

py::dict stat_dict(const Stat& s) {
  py::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["total"] = s.total;
  return d;
}

py::dict memory_stats_dict(const MemoryStats& s) {
  py::dict d;
  d["allocated_bytes"] = stat_dict(s.allocated_bytes);
  d["reserved_bytes"] = stat_dict(s.reserved_bytes);
  d["active_bytes"] = stat_dict(s.active_bytes);
  d["allocated_blocks"] = stat_dict(s.allocated_blocks);
  d["reserved_segments"] = stat_dict(s.reserved_segments);
  d["active_blocks"] = stat_dict(s.active_blocks);
  d["requested_bytes"] = s.requested_bytes;
  d["backend_allocations"] = s.backend_allocations;
  d["backend_frees"] = s.backend_frees;
  d["oom_count"] = s.oom_count;
  d["retries"] = s.retries;
  d["limit_bytes"] = s.limit_bytes ? py::object(py::int_(*s.limit_bytes)) : py::object(py::none());
  return d;
}

void register_dtypes(py::module_& m) {
  py::enum_<DType> dtype(m, "dtype", "The element type of a tensor: strata.float32, strata.int64, ...");
  struct Name {
    DType dtype;
    const char* name;
  };
  // The first name of each dtype is how it prints; the others are PyTorch's aliases.
  static const Name names[] = {{DType::Bool, "bool"},   {DType::U8, "uint8"},  {DType::I32, "int32"},
                               {DType::I32, "int"},     {DType::I64, "int64"}, {DType::I64, "long"},
                               {DType::F16, "float16"}, {DType::F16, "half"},  {DType::BF16, "bfloat16"},
                               {DType::F32, "float32"}, {DType::F32, "float"}, {DType::F64, "float64"},
                               {DType::F64, "double"}};
  for (const Name& n : names) {
    dtype.value(n.name, n.dtype);
    m.attr(n.name) = n.dtype;
  }
  // Replaces enum_'s own __repr__ (a def would only add an overload after it): dtypes print as PyTorch's do.
  auto repr = [](DType d) {
    for (const Name& n : names) {
      if (n.dtype == d) return "strata." + std::string(n.name);
    }
    return std::string("strata.dtype");
  };
  py::setattr(dtype, "__repr__", py::cpp_function(repr, py::name("__repr__"), py::is_method(dtype)));
  py::setattr(dtype, "__str__", py::cpp_function(repr, py::name("__str__"), py::is_method(dtype)));
  dtype.def_property_readonly("itemsize", [](DType d) { return dtype_size(d); });
  dtype.def_property_readonly("is_floating_point", [](DType d) { return is_floating(d); });
}

void register_devices(py::module_& m) {
  py::class_<Device>(m, "device", "A device: strata.device('cuda:0'), strata.device('cuda', 1), 'cpu'.")
      .def(py::init([](const std::string& text) { return Device(text); }), py::arg("type"))
      .def(py::init([](const std::string& type, int index) {
             // As the string "cpu:-1" is: Device's own constructor reads a negative CPU index as cpu:0.
             STRATA_CHECK(index >= 0, InvalidArgumentError, "device index must be non-negative, got {}", index);
             return Device(Device(type).type(), index);
           }),
           py::arg("type"), py::arg("index"))
      .def_property_readonly("type", [](Device d) { return std::string(device_type_name(d.type())); })
      .def_property_readonly("index",
                             [](Device d) { return d.has_index() ? py::object(py::int_(d.index())) : py::none(); })
      .def("__str__", &Device::str)
      .def("__repr__",
           [](Device d) {
             std::string type(device_type_name(d.type()));
             return d.has_index() ? "device(type='" + type + "', index=" + std::to_string(d.index()) + ")"
                                  : "device(type='" + type + "')";
           })
      .def("__eq__",
           [](Device a, py::handle b) {
             return py::isinstance<Device>(b) || py::isinstance<py::str>(b) ? a == to_device(b) : false;
           })
      .def("__hash__", [](Device d) { return std::hash<Device>{}(d); });
  py::implicitly_convertible<py::str, Device>();
}

void register_memory(py::module_& m) {
  m.def(
      "memory_stats", [](Device d) { return memory_stats_dict(memory_stats(d)); }, py::arg("device") = kCPU,
      "The caching allocator's figures for one device, as torch.cuda.memory_stats().");
  m.def(
      "memory_allocated", [](Device d) { return memory_stats(d).allocated_bytes.current; }, py::arg("device") = kCPU);
  m.def(
      "max_memory_allocated", [](Device d) { return memory_stats(d).allocated_bytes.peak; }, py::arg("device") = kCPU);
  m.def(
      "memory_reserved", [](Device d) { return memory_stats(d).reserved_bytes.current; }, py::arg("device") = kCPU);
  m.def(
      "max_memory_reserved", [](Device d) { return memory_stats(d).reserved_bytes.peak; }, py::arg("device") = kCPU);
  m.def(
      "reset_peak_memory_stats", [](Device d) { reset_peak_stats(d); }, py::arg("device") = kCPU);
  m.def(
      "empty_cache", [](std::optional<Device> d) { empty_cache(d); }, py::arg("device") = py::none());
  m.def(
      "set_memory_limit", [](Device d, std::size_t bytes) { set_memory_limit(d, bytes); }, py::arg("device"),
      py::arg("bytes"));
  m.def(
      "set_memory_fraction", [](Device d, double f) { set_memory_fraction(d, f); }, py::arg("device"),
      py::arg("fraction"));
  m.def(
      "clear_memory_limit", [](Device d) { clear_memory_limit(d); }, py::arg("device"));
  m.def(
      "memory_summary", [](Device d) { return memory_summary(d); }, py::arg("device") = kCPU);
  m.def(
      "transfer_counters",
      [] {
        const TransferCounters c = transfer_counters();
        py::dict d;
        d["host_to_device_copies"] = c.host_to_device_copies;
        d["host_to_device_bytes"] = c.host_to_device_bytes;
        d["device_to_host_copies"] = c.device_to_host_copies;
        d["device_to_host_bytes"] = c.device_to_host_bytes;
        d["device_to_device_copies"] = c.device_to_device_copies;
        d["device_to_device_bytes"] = c.device_to_device_bytes;
        d["synchronizations"] = c.synchronizations;
        return d;
      },
      "Copies between host and devices, and synchronisations, since start or the last reset.");
  m.def("reset_transfer_counters", &reset_transfer_counters);
}

void register_devices_queries(py::module_& m) {
  m.def("cuda_is_available", &cuda::is_available);
  m.def("cuda_device_count", &cuda::device_count);
  m.def("cuda_unavailable_reason", &cuda::unavailable_reason);
  m.def("cuda_device_name", &cuda::device_name, py::arg("index"));
  m.def("cuda_current_device", &cuda::current_device);
  m.def("cuda_set_device", &cuda::set_device, py::arg("index"));
  m.def(
      "synchronize", [](Device d) { without_gil([&] { synchronize(d); }); }, py::arg("device"));
  m.def("cpu_device_count", &cpu_device_count);
  m.def("set_cpu_device_count", &set_cpu_device_count, py::arg("count"));
  m.def(
      "devices",
      [] {
        std::vector<Device> all;
        for (int i = 0; i < cpu_device_count(); ++i) all.emplace_back(DeviceType::CPU, i);
        for (int i = 0; i < cuda::device_count(); ++i) all.emplace_back(DeviceType::CUDA, i);
        return all;
      },
      "Every device this process can use: the CPU devices, then the GPUs.");
}

}  // namespace

void register_runtime(py::module_& m) {
  register_dtypes(m);
  register_devices(m);
  register_memory(m);
  register_devices_queries(m);
  m.def("is_grad_enabled", &grad_enabled);
  m.def("set_grad_enabled", &set_grad_enabled, py::arg("mode"));
  m.def("manual_seed", &manual_seed, py::arg("seed"), "Seeds the generators of every device.");
  m.def("set_allow_tf32", &set_allow_tf32, py::arg("allow"));
}

void register_distributed(py::module_& m);  // distributed.cpp: strata.distributed's process group

}  // namespace strata::python

PYBIND11_MODULE(_C, m) {
  using namespace strata::python;
  m.doc() = "The compiled part of Strata's Python module; import strata instead.";
  register_errors(m);
  register_runtime(m);
  register_tensor(m);
  register_interop(m);
  register_nn(m);
  register_data(m);
  register_identity(m);
  register_jit(m);
  register_tensorboard(m);
  register_amp(m);
  register_profiler(m);
  register_distributed(m);
  rewrite_argument_errors(m);
}
