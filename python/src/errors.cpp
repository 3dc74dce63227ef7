// Strata's errors as Python exceptions. Each Strata error class becomes a Python class of the same name that
// derives from strata.Error (a RuntimeError) and, where Python has a fitting built-in kind, from it too: an
// IndexError is caught by `except IndexError`, a DTypeError by `except TypeError`, an InvalidArgumentError by
// `except ValueError`, an IOError by `except OSError`. The message is Strata's, unchanged.
#include <exception>
#include <string>

#include "bindings.h"

namespace strata::python {
namespace {

// Leaked on purpose: the classes must outlive every translation that might run during interpreter shutdown.
struct ErrorClasses {
  PyObject* error;
  PyObject* invalid_argument;
  PyObject* shape;
  PyObject* dtype;
  PyObject* index;
  PyObject* device_unavailable;
  PyObject* device_mismatch;
  PyObject* backend;
  PyObject* out_of_memory;
  PyObject* device_assert;
  PyObject* sync_debug;
  PyObject* not_implemented;
  PyObject* io;
  PyObject* distributed;
  PyObject* collective_timeout;
  PyObject* collective_mismatch;
};
ErrorClasses* classes = nullptr;

PyObject* make_class(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  py::dict namespace_;
  namespace_["__module__"] = "strata";
  namespace_["__doc__"] = doc;
  py::object cls = py::module_::import("builtins").attr("type")(name, bases, namespace_);
  m.attr(name) = cls;
  return cls.release().ptr();
}

void translate(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const ShapeError& e) {
    PyErr_SetString(classes->shape, e.what());
  } catch (const DTypeError& e) {
    PyErr_SetString(classes->dtype, e.what());
  } catch (const IndexError& e) {
    PyErr_SetString(classes->index, e.what());
  } catch (const InvalidArgumentError& e) {
    PyErr_SetString(classes->invalid_argument, e.what());
  } catch (const DeviceUnavailableError& e) {
    PyErr_SetString(classes->device_unavailable, e.what());
  } catch (const DeviceMismatchError& e) {
    PyErr_SetString(classes->device_mismatch, e.what());
  } catch (const BackendError& e) {
    PyErr_SetString(classes->backend, e.what());
  } catch (const OutOfMemoryError& e) {
    PyErr_SetString(classes->out_of_memory, e.what());
  } catch (const DeviceAssertError& e) {
    PyErr_SetString(classes->device_assert, e.what());
  } catch (const SyncDebugError& e) {
    PyErr_SetString(classes->sync_debug, e.what());
  } catch (const NotImplementedError& e) {
    PyErr_SetString(classes->not_implemented, e.what());
  } catch (const IOError& e) {
    PyErr_SetString(classes->io, e.what());
  } catch (const CollectiveTimeoutError& e) {
    PyErr_SetString(classes->collective_timeout, e.what());
  } catch (const CollectiveMismatchError& e) {
    PyErr_SetString(classes->collective_mismatch, e.what());
  } catch (const DistributedError& e) {
    PyErr_SetString(classes->distributed, e.what());
  } catch (const Error& e) {
    PyErr_SetString(classes->error, e.what());
  }
}

}  // namespace

void register_errors(py::module_& m) {
  auto builtin = [](const char* name) { return py::module_::import("builtins").attr(name); };
  // The classes are held as raw handles; tuples of bases borrow them.
  auto of = [](PyObject* a) { return py::reinterpret_borrow<py::object>(a); };
  classes = new ErrorClasses{};
  ErrorClasses& c = *classes;
  c.error = make_class(m, "Error", py::make_tuple(builtin("RuntimeError")), "Base of every error Strata raises.");
  c.invalid_argument = make_class(m, "InvalidArgumentError", py::make_tuple(of(c.error), builtin("ValueError")),
                                  "A value given by the caller is malformed or out of range.");
  c.shape = make_class(m, "ShapeError", py::make_tuple(of(c.invalid_argument)), "A shape does not fit the operation.");
  c.dtype = make_class(m, "DTypeError", py::make_tuple(of(c.invalid_argument), builtin("TypeError")),
                       "A dtype does not fit the operation.");
  c.index = make_class(m, "IndexError", py::make_tuple(of(c.invalid_argument), builtin("IndexError")),
                       "An index is outside the valid range.");
  auto runtime = [&](const char* name, const char* doc) {
    return make_class(m, name, py::make_tuple(of(c.error)), doc);
  };
  c.device_unavailable = runtime("DeviceUnavailableError", "A device was named that cannot be used here.");
  c.device_mismatch = runtime("DeviceMismatchError", "The inputs of an operation live on different devices.");
  c.backend = runtime("BackendError", "A backend library reported a failure.");
  c.out_of_memory = runtime("OutOfMemoryError", "The allocator could not satisfy a request.");
  c.device_assert = runtime("DeviceAssertError", "An assertion failed inside a kernel.");
  c.sync_debug = runtime("SyncDebugError", "A synchronising call was made while STRATA_SYNC_DEBUG=error.");
  c.not_implemented = make_class(m, "NotImplementedError", py::make_tuple(of(c.error), builtin("NotImplementedError")),
                                 "A feature that exists in the API but is not built yet.");
  c.io = make_class(m, "IOError", py::make_tuple(of(c.error), builtin("OSError")),
                    "Reading or writing a file failed, or its content is malformed.");
  c.distributed = runtime("DistributedError", "A collective across processes failed.");
  c.collective_timeout = make_class(m, "CollectiveTimeoutError", py::make_tuple(of(c.distributed)),
                                    "A collective did not finish within the process group's timeout.");
  c.collective_mismatch = make_class(m, "CollectiveMismatchError", py::make_tuple(of(c.distributed)),
                                     "Ranks passed different ops, shapes or dtypes to the same collective.");
  py::register_exception_translator(translate);
}

}  // namespace strata::python
