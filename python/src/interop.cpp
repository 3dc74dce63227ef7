// Exchange without copies: NumPy arrays in (from_numpy) and out (.numpy(), __array__), DLPack both ways
// (__dlpack__, __dlpack_device__, from_dlpack), and safetensors files.
#include <pybind11/numpy.h>

#include <string>

#include "bindings.h"

namespace strata::python {
namespace {

// Note [Python memory under Strata tensors]
// A tensor on a NumPy array's memory, or on another framework's DLPack tensor, keeps that Python object alive
// through its storage. The storage may die on any thread and without the GIL (a view dropped inside backward, which
// runs with the GIL released), so releasing the object takes the GIL first. At interpreter shutdown, when the GIL
// can no longer be taken, the reference is left to the process's end rather than risk a hang.
void with_gil(void (*f)(void*), void* arg) {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
  PyGILState_STATE state = PyGILState_Ensure();
  f(arg);
  PyGILState_Release(state);
}

/// The storage of a tensor on a NumPy array's memory (Note [Python memory under Strata tensors]).
struct NumpyMemory {
  Storage storage;
  PyObject* array = nullptr;
  ~NumpyMemory() {
    with_gil([](void* a) { Py_DECREF(static_cast<PyObject*>(a)); }, array);
  }
};

DType dtype_of_numpy(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (dt.byteorder() == '>') {
    throw DTypeError(
        "from_numpy: big-endian arrays are not supported; use arr.astype(arr.dtype.newbyteorder('='))");
  }
  if (kind == 'b' && size == 1) return DType::Bool;
  if (kind == 'u' && size == 1) return DType::U8;
  if (kind == 'i' && size == 4) return DType::I32;
  if (kind == 'i' && size == 8) return DType::I64;
  if (kind == 'f' && size == 2) return DType::F16;
  if (kind == 'f' && size == 4) return DType::F32;
  if (kind == 'f' && size == 8) return DType::F64;
  throw DTypeError("from_numpy: NumPy dtype " + std::string(py::str(static_cast<const py::handle&>(dt))) +
                       " has no Strata dtype; supported: bool, uint8, int32, int64, float16, float32, float64");
}

py::dtype numpy_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::Bool: return py::dtype("bool");
    case DType::U8: return py::dtype("uint8");
    case DType::I32: return py::dtype("int32");
    case DType::I64: return py::dtype("int64");
    case DType::F16: return py::dtype("float16");
    case DType::F32: return py::dtype("float32");
    case DType::F64: return py::dtype("float64");
    case DType::BF16: break;
  }
  throw DTypeError("numpy(): NumPy has no bfloat16; convert first, e.g. t.float().numpy()");
}

// Note [Read-only NumPy memory]
// Strata tensors are always writable: fill_, copy_, the in-place ops and every optimizer write without asking. A
// NumPy array that is not writeable (np.memmap(mode='r'), np.broadcast_to, np.frombuffer of bytes) may live on
// read-only pages or alias one element many times, so from_numpy and as_tensor copy it, with a warning, where
// PyTorch warns and shares it (a write then crashes or corrupts). Writeable arrays are shared, without a copy.
Tensor from_numpy(const py::array& array) {
  if (!array.writeable()) {
    if (PyErr_WarnEx(PyExc_UserWarning,
                     "from_numpy: the NumPy array is read-only, so the tensor holds a copy of it instead of sharing "
                     "its memory (Strata tensors are writable)",
                     1) != 0) {
      throw py::error_already_set();  // warnings turned into errors
    }
    return from_numpy(array.attr("copy")().cast<py::array>());
  }
  const DType dtype = dtype_of_numpy(array.dtype());
  const auto item = static_cast<int64_t>(array.itemsize());
  Shape shape;
  Strides strides;
  int64_t extent = array.size() > 0 ? 1 : 0;
  for (py::ssize_t d = 0; d < array.ndim(); ++d) {
    const int64_t stride = array.strides(d);
    if (stride < 0 || stride % item != 0) {
      throw InvalidArgumentError("from_numpy: strides of " + std::to_string(stride) +
                            " bytes are not supported (negative, or not a multiple of the element size); "
                            "copy with numpy.ascontiguousarray first");
    }
    shape.push_back(array.shape(d));
    strides.push_back(stride / item);
    if (array.shape(d) > 0) extent += (array.shape(d) - 1) * (stride / item);
  }
  auto memory = std::make_shared<NumpyMemory>();
  const auto nbytes = static_cast<std::size_t>(extent * item);
  void* data = const_cast<void*>(array.data());
  // A DataPtr without an owner frees nothing; the array's reference, dropped with the storage, frees the memory.
  memory->storage.data = DataPtr(data, nbytes, kCPU, nullptr, nullptr);
  memory->storage.nbytes = nbytes;
  memory->storage.device = kCPU;
  memory->array = array.inc_ref().ptr();
  std::shared_ptr<Storage> storage(memory, &memory->storage);
  return Tensor(std::move(storage), dtype, std::move(shape), std::move(strides), 0);
}

py::array to_numpy(const Tensor& t) {
  if (!t.device().is_cpu()) {
    throw TypeError("numpy(): can't convert a " + t.device().str() +
                         " tensor to NumPy; use .cpu() to copy it to host memory first");
  }
  if (t.requires_grad()) {
    throw std::runtime_error("numpy(): can't call numpy() on a tensor that requires grad; use .detach().numpy()");
  }
  const py::dtype dtype = numpy_dtype_of(t.dtype());
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  std::vector<py::ssize_t> strides;
  for (int64_t s : t.strides()) strides.push_back(s * static_cast<int64_t>(t.element_size()));
  // The array holds the storage, so the memory outlives the tensor handle.
  auto* keep = new std::shared_ptr<Storage>(t.storage());
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  return py::array(dtype, shape, strides, t.numel() > 0 ? t.data_ptr() : nullptr, owner);
}

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

// A capsule that nobody consumed still owns its tensor: its destructor runs the deleter. A consumer renames it to
// "used_dltensor", after which the consumer runs the deleter, exactly once.
void delete_unconsumed(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kUsedCapsuleName)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed == nullptr) {
    PyErr_WriteUnraisable(capsule);
  } else if (managed->deleter != nullptr) {
    managed->deleter(managed);
  }
  PyErr_Restore(type, value, traceback);
}

// The keywords of the Array API's __dlpack__: max_version is accepted and answered with an unversioned capsule (what
// Debian's DLPack 0.6 has, and what the protocol lets a producer return); dl_device must be the tensor's own.
py::object to_dlpack_capsule(const Tensor& self, py::object stream, py::object /*max_version*/, py::object dl_device,
                             py::object copy) {
  if (!dl_device.is_none()) {
    const auto wanted = dl_device.cast<std::pair<int, int>>();
    const DLDevice own = io::to_dl_device(self.device());
    if (wanted.first != static_cast<int>(own.device_type) || wanted.second != own.device_id) {
      PyErr_SetString(PyExc_BufferError, "__dlpack__: exporting to another device than the tensor's is not supported");
      throw py::error_already_set();
    }
  }
  const Tensor t = !copy.is_none() && copy.cast<bool>() ? without_gil([&] { return self.clone(); }) : self;
  // A consumer on another stream orders itself after ours (the stream argument of the protocol); without that
  // machinery here, the exporter waits for the device's work, which is always correct.
  if (t.device().is_cuda() && !(py::isinstance<py::int_>(stream) && stream.cast<int64_t>() == -1)) {
    without_gil([&] { synchronize(t.device()); });
  }
  DLManagedTensor* managed = io::to_dlpack(t);
  PyObject* capsule = PyCapsule_New(managed, kCapsuleName, delete_unconsumed);
  if (capsule == nullptr) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

/// Wraps a producer's DLManagedTensor so that its deleter runs with the GIL (Note [Python memory under Strata
/// tensors]): Python producers free Python objects there.
struct Consumed {
  DLManagedTensor outer{};
  DLManagedTensor* inner = nullptr;
};

void delete_consumed(DLManagedTensor* self) {
  auto* c = static_cast<Consumed*>(self->manager_ctx);
  with_gil(
      [](void* p) {
        auto* inner = static_cast<DLManagedTensor*>(p);
        if (inner->deleter != nullptr) inner->deleter(inner);
      },
      c->inner);
  delete c;
}

Tensor from_dlpack(py::object source) {
  py::object capsule = source;
  if (!PyCapsule_CheckExact(source.ptr())) {
    if (!py::hasattr(source, "__dlpack__")) {
      throw TypeError("from_dlpack: " + type_name(source) +
                           " has no __dlpack__ method and is not a DLPack capsule");
    }
    capsule = source.attr("__dlpack__")();
  }
  if (!PyCapsule_IsValid(capsule.ptr(), kCapsuleName)) {
    throw InvalidArgumentError("from_dlpack: the capsule is not a DLPack tensor, or was consumed already");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  auto* consumed = new Consumed{};
  consumed->inner = managed;
  consumed->outer.dl_tensor = managed->dl_tensor;
  consumed->outer.manager_ctx = consumed;
  consumed->outer.deleter = delete_consumed;
  Tensor t;
  try {
    t = io::from_dlpack(&consumed->outer);
  } catch (...) {
    delete consumed;  // the capsule still owns the producer's tensor
    throw;
  }
  PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName);
  return t;
}

}  // namespace

void register_interop(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::object>(m.attr("Tensor"));
  m.def("from_numpy", &from_numpy, py::arg("array").noconvert(),
        "A tensor on the array's memory, without a copy; it keeps the array alive.");
  py::setattr(cls, "numpy",
              py::cpp_function(&to_numpy, py::name("numpy"), py::is_method(cls),
                               "A NumPy array on this CPU tensor's memory, without a copy."));
  py::setattr(cls, "__array__",
              py::cpp_function(
                  [](const Tensor& t, py::object dtype) -> py::object {
                    py::array a = to_numpy(t.requires_grad() ? t.detach() : t);
                    return dtype.is_none() ? py::object(a) : a.attr("astype")(dtype, py::arg("copy") = false);
                  },
                  py::name("__array__"), py::is_method(cls), py::arg("dtype") = py::none()));
  py::setattr(cls, "__dlpack__",
              py::cpp_function(&to_dlpack_capsule, py::name("__dlpack__"), py::is_method(cls), py::kw_only(),
                               py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
                               py::arg("dl_device") = py::none(), py::arg("copy") = py::none()));
  py::setattr(cls, "__dlpack_device__",
              py::cpp_function(
                  [](const Tensor& t) {
                    const DLDevice d = io::to_dl_device(t.device());
                    return py::make_tuple(static_cast<int>(d.device_type), d.device_id);
                  },
                  py::name("__dlpack_device__"), py::is_method(cls)));
  m.def("from_dlpack", &from_dlpack, py::arg("ext_tensor"),
        "A tensor on the memory of anything that speaks DLPack (an object with __dlpack__, or a capsule).");

  m.def(
      "save_file",
      [](const std::map<std::string, Tensor>& tensors, const std::string& path,
         std::optional<std::map<std::string, std::string>> metadata) {
        without_gil([&] { io::save_safetensors(path, tensors, metadata.value_or(io::Metadata{})); });
      },
      py::arg("tensors"), py::arg("filename"), py::arg("metadata") = py::none(),
      "Writes tensors by name to a safetensors file, atomically.");
  m.def(
      "load_file_with_metadata",
      [](const std::string& path, Device device) {
        io::SafetensorsContent content = without_gil([&] { return io::load_safetensors(path, device); });
        return py::make_tuple(content.tensors, content.metadata);
      },
      py::arg("filename"), py::arg("device") = kCPU);
  // The same for file objects, which strata.save and strata.load read and write in Python.
  m.def(
      "_save_bytes",
      [](const std::map<std::string, Tensor>& tensors, std::optional<std::map<std::string, std::string>> metadata,
         const std::string& name) {
        const std::string bytes =
            without_gil([&] { return io::save_safetensors_bytes(tensors, metadata.value_or(io::Metadata{}), name); });
        return py::bytes(bytes);
      },
      py::arg("tensors"), py::arg("metadata") = py::none(), py::arg("name") = "<bytes>");
  m.def(
      "_load_bytes",
      [](const py::bytes& data, Device device, const std::string& name) {
        char* begin = nullptr;
        Py_ssize_t size = 0;
        if (PyBytes_AsStringAndSize(data.ptr(), &begin, &size) != 0) throw py::error_already_set();
        const std::string_view view(begin, static_cast<std::size_t>(size));  // `data` stays alive for the call
        io::SafetensorsContent content = without_gil([&] { return io::load_safetensors_bytes(view, device, name); });
        return py::make_tuple(content.tensors, content.metadata);
      },
      py::arg("data"), py::arg("device") = kCPU, py::arg("name") = "<bytes>");
  m.def(
      "storage_use_count", [](const Tensor& t) { return t.storage().use_count(); },
      "How many owners the tensor's memory has (tests check the DLPack and NumPy ownership with it).");
}

}  // namespace strata::python
