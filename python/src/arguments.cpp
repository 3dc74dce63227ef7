// Python arguments to Strata's types: tensors, ints, shapes, dtypes and devices. Each conversion refuses what it
// cannot take with a strata.TypeError naming the argument, the types it accepts and the one it got, so that
// pybind11's "Unable to cast Python instance to C++ type" never reaches the user.
#include <string>

#include "bindings.h"

namespace pybind11::detail {

// Note [Tensors Python cannot break]
// pybind11 lets Python make an instance without running __init__ (strata.Tensor.__new__(strata.Tensor), or
// nn.Parameter.__new__ as Parameter._of does before its __init__); reading one hands C++ uninitialised memory as a
// Tensor. Every tensor argument and every method's self passes through this caster, so the check here covers all
// of them at the cost of reading one flag. The other way, an undefined C++ Tensor becomes None, as PyTorch shows an
// undefined tensor, so that Python never holds a tensor whose methods would dereference nothing.
bool type_caster<strata::Tensor>::load(handle src, bool convert) {
  if (src && isinstance<strata::Tensor>(src)) {
    auto* inst = reinterpret_cast<instance*>(src.ptr());
    STRATA_CHECK(inst->get_value_and_holder().holder_constructed(), strata::InvalidArgumentError,
                 "this {} was never initialised ({}.__new__ without __init__); make tensors with strata.tensor, "
                 "strata.empty, strata.zeros...",
                 strata::python::type_name(src), strata::python::type_name(src));
  }
  return Base::load(src, convert);
}

}  // namespace pybind11::detail

namespace strata::python {

std::string type_name(py::handle value) {
  return value.is_none() ? "None" : std::string(py::str(py::type::handle_of(value).attr("__name__")));
}

int64_t to_int(py::handle value, const char* what) {
  // Floats and bools have no place where a size or an index is wanted, as in PyTorch; __index__ is Python's way
  // of saying "an integer" (NumPy integers, one-element integer tensors).
  const bool integer = !PyBool_Check(value.ptr()) && !PyFloat_Check(value.ptr()) &&
                       (PyLong_Check(value.ptr()) || py::hasattr(value, "__index__"));
  if (!integer) throw TypeError(fmt::format("{} must be an int, not {}", what, type_name(value)));
  const auto index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  STRATA_CHECK(overflow == 0, InvalidArgumentError, "{} {} does not fit in 64 bits", what,
               std::string(py::str(index)));
  return static_cast<int64_t>(v);
}

namespace {

// An int, a NumPy integer or a 0-d tensor (PyTorch takes them in sizes); a one-element 1-D tensor has __index__
// too, but it is a sequence of sizes.
bool is_int_like(py::handle h) {
  if (PyLong_Check(h.ptr())) return true;
  if (py::isinstance<Tensor>(h)) return h.cast<const Tensor&>().dim() == 0;
  return !PySequence_Check(h.ptr()) && py::hasattr(h, "__index__");
}

// The elements of a shape given as an integer array or tensor, as a list of Python ints.
py::object integer_elements(py::handle values, const char* what) {
  const bool tensor = py::isinstance<Tensor>(values);
  const py::object dtype = values.attr("dtype");
  const bool integral = tensor ? is_integral(dtype.cast<DType>()) && dtype.cast<DType>() != DType::Bool
                               : std::string("iu").find(dtype.attr("kind").cast<std::string>()) != std::string::npos;
  const auto ndim = values.attr("ndim").cast<int64_t>();
  if (!integral || ndim > 1) {
    throw TypeError(fmt::format("{} must be an int or a sequence of ints, not a {}-D {} of {}", what, ndim,
                                type_name(values), std::string(py::str(dtype))));
  }
  return values.attr("tolist")();
}

}  // namespace

Shape to_shape(py::handle sizes, const char* what) {
  if (is_int_like(sizes)) return Shape{to_int(sizes, what)};
  py::object seq = py::reinterpret_borrow<py::object>(sizes);
  // zeros((2, 3)) and zeros(2, 3) both arrive as a tuple; the first holds one sequence. One level only.
  if (PyTuple_Check(seq.ptr()) && PyTuple_GET_SIZE(seq.ptr()) == 1 && !is_int_like(PyTuple_GET_ITEM(seq.ptr(), 0))) {
    seq = py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(seq.ptr(), 0));
  }
  if (py::isinstance<Tensor>(seq) || py::hasattr(seq, "__array_interface__")) {
    if (seq.attr("ndim").cast<int64_t>() == 0) return Shape{to_int(seq, what)};
    seq = integer_elements(seq, what);
  }
  // A 1-element integer tensor converts through __index__ above; strings are sequences of strings, never sizes.
  if (PyUnicode_Check(seq.ptr()) || PyBytes_Check(seq.ptr()) || PyByteArray_Check(seq.ptr()) ||
      !PySequence_Check(seq.ptr()) || PyDict_Check(seq.ptr())) {
    throw TypeError(fmt::format("{} must be an int or a sequence of ints (tuple, list, strata.Size, 1-D integer "
                                "array or tensor), not {}",
                                what, type_name(seq)));
  }
  // PySequence_Fast holds every item (a list of new references for a range or another sequence) while we read.
  const auto items = py::reinterpret_steal<py::object>(PySequence_Fast(seq.ptr(), "a shape must be a sequence"));
  if (!items) throw py::error_already_set();
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(items.ptr());
  STRATA_CHECK(count <= kMaxDims, InvalidArgumentError, "{} has {} dimensions; at most {} are supported", what, count,
               kMaxDims);
  Shape shape;
  for (Py_ssize_t i = 0; i < count; ++i) {
    const py::handle item = PySequence_Fast_GET_ITEM(items.ptr(), i);
    if (!is_int_like(item)) {
      throw TypeError(fmt::format("{} must be a sequence of ints, but element {} is {}", what, i, type_name(item)));
    }
    shape.push_back(to_int(item, what));
  }
  return shape;
}

Shape to_sizes(py::handle sizes, const char* what) {
  Shape shape = to_shape(sizes, what);
  for (int64_t size : shape) {
    STRATA_CHECK(size >= 0, InvalidArgumentError, "{} must not be negative, got {} in {}", what, size, shape);
  }
  return shape;
}

DType to_dtype(py::handle dtype, DType fallback) {
  if (dtype.is_none()) return fallback;
  if (!py::isinstance<DType>(dtype)) {
    // PyTorch refuses dtype names as strings too; the message says which object was meant.
    const py::object named = PyUnicode_Check(dtype.ptr()) ? py::module_::import("strata._C").attr("__dict__").attr(
                                                                 "get")(dtype)
                                                           : py::object(py::none());
    throw TypeError(fmt::format("argument 'dtype' must be a strata.dtype (such as strata.float32), not {}{}",
                                type_name(dtype),
                                py::isinstance<DType>(named) ? " (write strata." + dtype.cast<std::string>() + ")"
                                                             : std::string()));
  }
  return dtype.cast<DType>();
}

Device to_device(py::handle device) {
  if (device.is_none()) return kCPU;
  if (PyUnicode_Check(device.ptr())) return Device(device.cast<std::string>());
  if (!py::isinstance<Device>(device)) {
    throw TypeError(fmt::format(
        "argument 'device' must be a strata.device or a string such as 'cpu' or 'cuda:0', not {}", type_name(device)));
  }
  return device.cast<Device>();
}

Tensor to_tensor(py::handle value, const char* what, bool none_ok) {
  if (none_ok && value.is_none()) return Tensor();
  if (!py::isinstance<Tensor>(value)) {
    throw TypeError(fmt::format("{} must be a Tensor{}, not {}", what, none_ok ? " or None" : "", type_name(value)));
  }
  return value.cast<Tensor>();
}

}  // namespace strata::python
