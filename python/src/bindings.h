#pragma once
// What the translation units of the `strata._C` extension share: the Scalar caster, the conversions from Python
// arguments, and the functions that register each part of the module.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <exception>
#include <optional>
#include <thread>
#include <utility>

#include "strata/strata.h"

namespace pybind11::detail {

/// Python bool, int and float, and NumPy scalars, become a strata::Scalar. Tensors do not: `t + u` must pick the
/// tensor overload, never read a one-element tensor as a number behind the user's back.
template <>
struct type_caster<strata::Scalar> {
  PYBIND11_TYPE_CASTER(strata::Scalar, const_name("Scalar"));
  bool load(handle src, bool convert);
  static handle cast(const strata::Scalar& s, return_value_policy, handle) {
    if (s.kind() == strata::Scalar::Kind::Bool) return pybind11::bool_(s.to_bool()).release();
    if (s.kind() == strata::Scalar::Kind::Int) return PyLong_FromLongLong(s.to_int());
    return PyFloat_FromDouble(s.to_double());
  }
};

}  // namespace pybind11::detail

namespace strata::python {

namespace py = pybind11;

// Note [Taking the GIL back at exit]
// A thread that takes the GIL back while the interpreter finalizes (a daemon thread computing at exit) is ended by
// Python: PyEval_RestoreThread calls pthread_exit, which unwinds the thread's frames. pybind11's gil_scoped_release
// takes it back in a destructor, which is noexcept, so that unwinding called std::terminate and aborted the process.
// ReleasedGil's destructor may throw, so the unwinding ends the thread as Python intends (pybind11 lets
// abi::__forced_unwind through). While an exception is already unwinding, a second one would terminate too: then,
// at exit only, the thread sleeps until the process ends.
class ReleasedGil {
 public:
  ReleasedGil() : state_(PyEval_SaveThread()) {}
  ~ReleasedGil() noexcept(false);
  ReleasedGil(const ReleasedGil&) = delete;
  ReleasedGil& operator=(const ReleasedGil&) = delete;

 private:
  PyThreadState* state_;
};

inline ReleasedGil::~ReleasedGil() noexcept(false) {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing() != 0;
#else
  const bool finalizing = _Py_IsFinalizing() != 0;
#endif
  if (finalizing && std::uncaught_exceptions() > 0) {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  PyEval_RestoreThread(state_);
}

/// Runs f without the GIL: for anything that may take time (a product, a convolution, backward, a copy, a save),
/// so that other Python threads run meanwhile. Arguments must be converted from Python before.
template <typename F>
decltype(auto) without_gil(F&& f) {
  ReleasedGil release;
  return f();
}

/// A shape from a Python int or sequence of ints; `*sizes` calls pass a tuple that may hold one sequence.
Shape to_shape(py::handle sizes);
/// The dtype argument of a creation function: a strata dtype, or None for `fallback`.
DType to_dtype(py::handle dtype, DType fallback);
/// A device from a strata.device, a string ("cuda:0") or None (the CPU).
Device to_device(py::handle device);
/// A 0-dim tensor holding `value` on `like`'s device, so that ops taking two tensors take a number too.
Tensor scalar_like(const Scalar& value, const Tensor& like);

/// The part that turns Strata's errors into Python exceptions (errors.cpp).
void register_errors(py::module_& m);
/// dtypes, devices, grad mode, the CUDA and memory queries (module.cpp).
void register_runtime(py::module_& m);
/// The Tensor class, its operators and the tensor functions (tensor.cpp).
void register_tensor(py::module_& m);
/// NumPy and DLPack exchange, safetensors (interop.cpp).
void register_interop(py::module_& m);
/// Layers, functional, optimizers and schedulers (nn.cpp).
void register_nn(py::module_& m);
/// Datasets and the DataLoader (data.cpp).
void register_data(py::module_& m);

}  // namespace strata::python
