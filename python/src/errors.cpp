// Strata's errors as Python exceptions. Each Strata error class becomes a Python class of the same name that
// derives from strata.Error (a RuntimeError) and, where Python has a fitting built-in kind, from it too: an
// IndexError is caught by `except IndexError`, a DTypeError by `except TypeError`, an InvalidArgumentError by
// `except ValueError`, an IOError by `except OSError`. The message is Strata's, with C++ names put in Python's
// terms; pybind11's own argument errors are rewritten too (Note [Argument errors in Python's terms]).
#include <exception>
#include <string>
#include <regex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

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
  PyObject* compile;
  PyObject* type;
};
ErrorClasses* classes = nullptr;

// The name of the bound function running on this thread, for errors raised inside it.
thread_local const char* running_function = nullptr;

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// Strata's messages are written for C++ users too; a Python user reads Python's names for the same things.
std::string in_python_terms(std::string message) {
  static const std::pair<std::string_view, std::string_view> kTerms[] = {
      {"NoGradGuard", "strata.no_grad()"}, {"DType::Bool", "strata.bool"},     {"DType::U8", "strata.uint8"},
      {"DType::I32", "strata.int32"},      {"DType::I64", "strata.int64"},     {"DType::F16", "strata.float16"},
      {"DType::BF16", "strata.bfloat16"},  {"DType::F32", "strata.float32"},   {"DType::F64", "strata.float64"},
      {"std::nullopt", "None"}};
  for (const auto& [cpp, python] : kTerms) replace_all(message, cpp, python);
  return message;
}

// A message may quote bytes that are not UTF-8 (a path): PyErr_SetString would fail on them and leave the exception
// without a message, so they are decoded with backslash escapes.
void set_error(PyObject* cls, const char* what) {
  const std::string message = in_python_terms(what);
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "backslashreplace");
  if (text == nullptr) {
    PyErr_Clear();
    PyErr_SetString(cls, "(the error message could not be decoded)");
    return;
  }
  PyErr_SetObject(cls, text);
  Py_DECREF(text);
}

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
  } catch (const TypeError& e) {
    set_error(classes->type, e.what());
  } catch (const ShapeError& e) {
    set_error(classes->shape, e.what());
  } catch (const DTypeError& e) {
    set_error(classes->dtype, e.what());
  } catch (const IndexError& e) {
    set_error(classes->index, e.what());
  } catch (const InvalidArgumentError& e) {
    set_error(classes->invalid_argument, e.what());
  } catch (const DeviceUnavailableError& e) {
    set_error(classes->device_unavailable, e.what());
  } catch (const DeviceMismatchError& e) {
    set_error(classes->device_mismatch, e.what());
  } catch (const BackendError& e) {
    set_error(classes->backend, e.what());
  } catch (const OutOfMemoryError& e) {
    set_error(classes->out_of_memory, e.what());
  } catch (const DeviceAssertError& e) {
    set_error(classes->device_assert, e.what());
  } catch (const SyncDebugError& e) {
    set_error(classes->sync_debug, e.what());
  } catch (const NotImplementedError& e) {
    set_error(classes->not_implemented, e.what());
  } catch (const IOError& e) {
    set_error(classes->io, e.what());
  } catch (const CollectiveTimeoutError& e) {
    set_error(classes->collective_timeout, e.what());
  } catch (const CollectiveMismatchError& e) {
    set_error(classes->collective_mismatch, e.what());
  } catch (const DistributedError& e) {
    set_error(classes->distributed, e.what());
  } catch (const CompileError& e) {
    set_error(classes->compile, e.what());
  } catch (const Error& e) {
    set_error(classes->error, e.what());
  } catch (const py::type_error& e) {
    // The bindings' own refusals (py::type_error and the like) join Strata's classes, keeping Python's kind.
    set_error(classes->type, e.what());
  } catch (const py::value_error& e) {
    set_error(classes->invalid_argument, e.what());
  } catch (const py::index_error& e) {
    set_error(classes->index, e.what());
  } catch (const py::cast_error&) {
    // A conversion inside a binding that no argument check caught first: say where, never "C++ type".
    PyErr_SetString(classes->type, fmt::format("{}(): an argument has a type this function does not take; see "
                                               "help() for what it accepts",
                                               running_function != nullptr ? running_function : "strata")
                                       .c_str());
  }
}

// Note [Argument errors in Python's terms]
// When no overload of a bound function takes the arguments, pybind11 raises a TypeError that lists C++ signatures
// and the repr of every argument (a whole tensor's values). Every function of the module is a PyCFunction whose
// PyMethodDef calls pybind11's dispatcher; rewrite_argument_errors points each at dispatch() instead, which calls
// the dispatcher and, only when it failed that way, raises strata.TypeError with the signatures in Python's names
// and the types of the arguments given. Nothing else changes and a successful call pays one indirect call.
using Dispatcher = PyObject* (*)(PyObject*, PyObject*, PyObject*);
Dispatcher pybind11_dispatcher = nullptr;

std::string argument_types(PyObject* args, PyObject* kwargs, bool skip_self) {
  std::string out;
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  for (Py_ssize_t i = skip_self ? 1 : 0; i < n; ++i) {
    if (!out.empty()) out += ", ";
    out += type_name(PyTuple_GET_ITEM(args, i));
  }
  if (kwargs != nullptr) {
    for (auto item : py::reinterpret_borrow<py::dict>(kwargs)) {
      if (!out.empty()) out += ", ";
      out += std::string(py::str(item.first)) + "=" + type_name(item.second);
    }
  }
  return out;
}

// "(self: strata._C.Tensor, dim: object = None) -> object" as "dim: object = None" (self dropped, no return).
// "(self: strata._C.Tensor, dim: object = None) -> object" as "dim: object = None": no self, no return, and no
// "arg1: " where the binding named no argument.
std::string python_signature(std::string signature, bool method) {
  signature = signature.substr(0, signature.rfind(" -> "));
  if (!signature.empty() && signature.front() == '(') signature = signature.substr(1, signature.size() - 2);
  if (method) {
    const std::size_t comma = signature.find(", ");
    signature = comma == std::string::npos ? "" : signature.substr(comma + 2);
  }
  signature = std::regex_replace(signature, std::regex(R"(\barg\d+: )"), "");
  replace_all(signature, "strata._C.Tensor", "Tensor");
  replace_all(signature, "strata._C.", "strata.");
  return signature;
}

// Property getters and setters are nameless functions; the attribute that holds them names them.
std::unordered_map<const py::detail::function_record*, std::string>* property_names = nullptr;

void raise_in_python_terms(const py::detail::function_record* record, PyObject* args, PyObject* kwargs) {
  const bool method = record->is_method;
  const auto property = property_names->find(record);
  std::string name = property != property_names->end() ? property->second : record->name;
  if (method && record->scope) name = std::string(py::str(record->scope.attr("__name__"))) + "." + name;
  if (record->is_constructor) name = std::string(py::str(record->scope.attr("__name__")));
  if (property != property_names->end()) {  // only a setter takes an argument that can be wrong
    const std::string message = fmt::format("{}: cannot assign a {}; it takes {}", name,
                                            argument_types(args, kwargs, method),
                                            python_signature(record->signature, method));
    PyErr_SetString(classes->type, message.c_str());
    return;
  }
  std::string message = fmt::format("{}(): got ({}); it takes", name, argument_types(args, kwargs, method));
  const bool several = record->next != nullptr;
  message += several ? " one of:" : ":";
  for (const py::detail::function_record* r = record; r != nullptr; r = r->next) {
    message += fmt::format("\n    {}({})", name, python_signature(r->signature, method));
  }
  PyErr_SetString(classes->type, message.c_str());
}

PyObject* dispatch(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* record = static_cast<py::detail::function_record*>(PyCapsule_GetPointer(self, PyCapsule_GetName(self)));
  const char* outer = running_function;
  running_function = record != nullptr ? record->name : nullptr;
  PyObject* result = pybind11_dispatcher(self, args, kwargs);
  running_function = outer;
  if (result != nullptr || record == nullptr || !PyErr_ExceptionMatches(PyExc_TypeError)) return result;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  const std::string text = value != nullptr && type == PyExc_TypeError ? py::str(value).cast<std::string>() : "";
  if (text.find("(): incompatible function arguments") == std::string::npos &&
      text.find("(): incompatible constructor arguments") == std::string::npos) {
    PyErr_Restore(type, value, traceback);
    return nullptr;
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  raise_in_python_terms(record, args, kwargs);
  return nullptr;
}

// Points `function` at dispatch(): a pybind11 function, or the functions a method, a static method or a property
// holds; a property's are named after it.
void point_at_dispatch(PyObject* function, const std::string& property = "") {
  if (PyCFunction_Check(function)) {
    PyMethodDef* def = reinterpret_cast<PyCFunctionObject*>(function)->m_ml;
    if (reinterpret_cast<Dispatcher>(reinterpret_cast<void (*)()>(def->ml_meth)) != pybind11_dispatcher) return;
    def->ml_meth = reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&dispatch));
    PyObject* self = PyCFunction_GET_SELF(function);
    if (!property.empty()) {
      (*property_names)[static_cast<py::detail::function_record*>(
          PyCapsule_GetPointer(self, PyCapsule_GetName(self)))] = property;
    }
  } else if (PyInstanceMethod_Check(function)) {
    point_at_dispatch(PyInstanceMethod_GET_FUNCTION(function));
  } else if (PyObject_TypeCheck(function, &PyStaticMethod_Type)) {
    point_at_dispatch(py::getattr(function, "__func__").ptr());
  } else if (PyObject_TypeCheck(function, &PyProperty_Type)) {
    for (const char* part : {"fget", "fset"}) point_at_dispatch(py::getattr(function, part).ptr(), property);
  }
}

void rewrite_functions_of(py::handle scope, std::unordered_set<PyObject*>& seen) {
  if (!seen.insert(scope.ptr()).second) return;
  // A class's own dict: its __dict__ attribute is a read-only proxy that py::dict cannot walk.
  PyObject* dict = PyType_Check(scope.ptr()) ? reinterpret_cast<PyTypeObject*>(scope.ptr())->tp_dict
                                             : PyModule_GetDict(scope.ptr());
  for (auto item : py::reinterpret_borrow<py::dict>(dict)) {
    py::handle value = item.second;
    const char* origin = PyModule_Check(value.ptr()) ? "__name__" : "__module__";
    const bool ours = (PyModule_Check(value.ptr()) || PyType_Check(value.ptr())) && py::hasattr(value, origin) &&
                      std::string(py::str(value.attr(origin))).rfind("strata", 0) == 0;
    if (ours) {
      rewrite_functions_of(value, seen);
    } else {
      point_at_dispatch(value.ptr(), std::string(py::str(item.first)));
    }
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
  c.compile = runtime("CompileError", "A kernel compiled at run time did not compile; the message has the log.");
  c.type = make_class(m, "TypeError", py::make_tuple(of(c.invalid_argument), builtin("TypeError")),
                      "An argument has a type the function does not take.");
  py::register_exception_translator(translate);
}

void rewrite_argument_errors(py::module_& m) {
  // Every pybind11 function has the same ml_meth: the dispatcher, read here from a function made for the purpose.
  const py::cpp_function probe([] {});
  PyObject* function = PyInstanceMethod_Check(probe.ptr()) ? PyInstanceMethod_GET_FUNCTION(probe.ptr()) : probe.ptr();
  pybind11_dispatcher = reinterpret_cast<Dispatcher>(
      reinterpret_cast<void (*)()>(reinterpret_cast<PyCFunctionObject*>(function)->m_ml->ml_meth));
  property_names = new std::unordered_map<const py::detail::function_record*, std::string>();  // leaked, as classes
  std::unordered_set<PyObject*> seen;
  rewrite_functions_of(m, seen);
}

}  // namespace strata::python
