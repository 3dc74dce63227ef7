// One Python object per tensor (Note [One Python object per tensor] in bindings.h).
#include <unordered_map>

#include "bindings.h"

namespace strata::python {
namespace {

// Weak references to the live objects, by tensor identity, and the other way round for the callback that forgets
// an object when it dies. On the heap and never freed: objects may die while the interpreter finalizes, after static
// destructors would have run. Every access holds the GIL.
struct Objects {
  std::unordered_map<const void*, PyObject*> weak_by_tensor;  // owned references to weakref objects
  std::unordered_map<PyObject*, const void*> tensor_by_weak;
  py::object forget;  // the weakref callback
};

Objects& objects() {
  static Objects* table = new Objects();
  return *table;
}

void forget(PyObject* weak) {
  Objects& table = objects();
  const auto it = table.tensor_by_weak.find(weak);
  if (it == table.tensor_by_weak.end()) return;
  const auto by_tensor = table.weak_by_tensor.find(it->second);
  if (by_tensor != table.weak_by_tensor.end() && by_tensor->second == weak) table.weak_by_tensor.erase(by_tensor);
  table.tensor_by_weak.erase(it);
  Py_DECREF(weak);
}

void remember(const void* tensor, py::handle object) {
  Objects& table = objects();
  if (!table.forget) {
    table.forget = py::cpp_function([](py::handle weak) { forget(weak.ptr()); });
  }
  PyObject* weak = PyWeakref_NewRef(object.ptr(), table.forget.ptr());
  if (weak == nullptr) {  // not weakly referenceable: simply not remembered
    PyErr_Clear();
    return;
  }
  const auto it = table.weak_by_tensor.find(tensor);
  if (it != table.weak_by_tensor.end()) {
    // A newer object takes the tensor's place (a Parameter made from it); the older one is forgotten.
    table.tensor_by_weak.erase(it->second);
    Py_DECREF(it->second);
    it->second = weak;
  } else {
    table.weak_by_tensor.emplace(tensor, weak);
  }
  table.tensor_by_weak.emplace(weak, tensor);
}

}  // namespace

py::handle existing_object(const Tensor& t) {
  Objects& table = objects();
  const auto it = table.weak_by_tensor.find(t.identity());
  if (it == table.weak_by_tensor.end()) return {};
  PyObject* object = PyWeakref_GetObject(it->second);  // borrowed; None once dead
  if (object == Py_None) return {};
  return py::handle(object).inc_ref();
}

py::handle remember_object(const void* tensor, py::handle object) {
  if (object) remember(tensor, object);
  return object;
}

void register_identity(py::module_& m) {
  m.def(
      "_adopt", [](py::object tensor) { remember(tensor.cast<const Tensor&>().identity(), tensor); }, py::arg("tensor"),
      "Makes this object the one that stands for its tensor from now on (strata.nn.Parameter).");
}

}  // namespace strata::python
