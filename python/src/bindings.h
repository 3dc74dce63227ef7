#pragma once
// What the translation units of the `strata._C` extension share: the Scalar caster, the conversions from Python
// arguments, and the functions that register each part of the module.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
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

/// Runs f without the GIL: for anything that may take time (a product, a convolution, backward, a copy, a save),
/// so that other Python threads run meanwhile. Arguments must be converted from Python before.
template <typename F>
decltype(auto) without_gil(F&& f) {
  py::gil_scoped_release release;
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
