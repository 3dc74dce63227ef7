#pragma once
// What the translation units of the `strata._C` extension share: the Scalar caster, the conversions from Python
// arguments, and the functions that register each part of the module.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "strata/strata.h"

namespace strata::python {

// Note [One Python object per tensor]
// As in PyTorch, a tensor has one Python object while that object lives: t.to("cpu") is t, t.contiguous() is t,
// w.grad is w.grad, and a C++ layer's weight is the Parameter that wraps it. The bindings keep a weak reference to
// the object of each tensor (by Tensor::identity); the caster returns it when alive and remembers each new one.
// A Parameter made from a tensor takes its place (strata.nn.Parameter calls _C._adopt).

/// The live Python object of this tensor, as a new reference, or a null handle.
pybind11::handle existing_object(const Tensor& t);
/// Remembers `object` (a new reference, returned as is) as the object of the tensor whose identity() is `tensor`.
pybind11::handle remember_object(const void* tensor, pybind11::handle object);

}  // namespace strata::python

namespace pybind11::detail {

/// Python bool, int and float, and NumPy scalars, become a strata::Scalar. Tensors do not: `t + u` must pick the
/// tensor overload, never read a one-element tensor as a number behind the user's back.
template <>
struct type_caster<strata::Scalar> {
  PYBIND11_TYPE_CASTER(strata::Scalar, const_name("number"));
  bool load(handle src, bool convert);
  static handle cast(const strata::Scalar& s, return_value_policy, handle) {
    if (s.kind() == strata::Scalar::Kind::Bool) return pybind11::bool_(s.to_bool()).release();
    if (s.kind() == strata::Scalar::Kind::Int) return PyLong_FromLongLong(s.to_int());
    return PyFloat_FromDouble(s.to_double());
  }
};

/// Tensors as pybind11 registers them, with two guards (Note [Tensors Python cannot break]): an instance whose
/// __init__ never ran (strata.Tensor.__new__(strata.Tensor)) is refused instead of read, and an undefined tensor
/// reaches Python as None. A tensor that already has a Python object comes back as that object (Note [One Python
/// object per tensor]); a new one holds its own handle (a copy: handles are cheap, and never dangle).
template <>
struct type_caster<strata::Tensor> : type_caster_base<strata::Tensor> {
  using Base = type_caster_base<strata::Tensor>;
  bool load(handle src, bool convert);
  static handle cast(const strata::Tensor& t, return_value_policy, handle parent) {
    if (!t.defined()) return none().release();
    if (handle existing = strata::python::existing_object(t)) return existing;
    return strata::python::remember_object(t.identity(), Base::cast(t, return_value_policy::copy, parent));
  }
  static handle cast(strata::Tensor&& t, return_value_policy, handle parent) {
    if (!t.defined()) return none().release();
    if (handle existing = strata::python::existing_object(t)) return existing;
    const void* identity = t.identity();  // before the handle moves into the new object
    return strata::python::remember_object(identity, Base::cast(std::move(t), return_value_policy::move, parent));
  }
  static handle cast(const strata::Tensor* t, return_value_policy policy, handle parent) {
    return t != nullptr ? cast(*t, policy, parent) : none().release();
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

// Note [Replacing a tensor's data while other threads compute]
// Tensor::set_data (Module.to/double/cuda, `t.data = x`) rewrites a tensor's storage, dtype and shape in place, so
// that every handle to it, an optimizer's included, sees the new data. In C++, ordering that against other threads is
// the caller's job, as for any object. From Python it must not be: threads release the GIL inside ops, and a storage
// swapped under a running kernel is a use-after-free, or an f64 kernel writing into f32 memory. So every stretch
// without the GIL (Computing) holds one process-wide lock shared, and Python's set_data runs holding both the GIL
// and that lock exclusively (replacing_data): each op sees a tensor wholly before or wholly after. Ops that keep the
// GIL need nothing more. A waiting replacement goes first, so that threads computing in a loop cannot starve it (for
// at most 20 ms: the new stretch may be one an outer stretch waits for). Replacing data from inside a stretch on the
// same thread (a backward hook, a Dataset run by a loader's worker) would wait for itself: it raises instead. os.fork()
// waits for the stretches too (Note [Forking while other threads compute] in threads.cpp).

/// The GIL released, and the lock of Note [Replacing a tensor's data while other threads compute] held shared
/// (once per thread: stretches nest, as when a hook called by backward runs an op).
class Computing {
 public:
  Computing();
  ~Computing() noexcept(false);
  Computing(const Computing&) = delete;
  Computing& operator=(const Computing&) = delete;

 private:
  ReleasedGil release_;  // first in, last out: the lock is taken without the GIL and given back before it
  bool outermost_;
};

/// Runs f without the GIL: for anything that may take time (a product, a convolution, backward, a copy, a save),
/// so that other Python threads run meanwhile. Arguments must be converted from Python before.
template <typename F>
decltype(auto) without_gil(F&& f) {
  Computing computing;
  return f();
}

/// Runs f, which replaces tensors' data (Tensor::set_data), while no other thread computes without the GIL. Called
/// with the GIL held; `what` names the call in the error raised from inside a computation on this thread.
void replacing_data(const char* what, const std::function<void()>& f);

/// A wrong argument type, raised as strata.TypeError (a strata.InvalidArgumentError and a TypeError).
class TypeError : public InvalidArgumentError {
 public:
  explicit TypeError(const std::string& message) : InvalidArgumentError(message) {}
};

/// More dimensions than a shape or an index may have, as NumPy's limit: deeper ones only exhaust time and stack.
inline constexpr int64_t kMaxDims = 64;

/// The name of a Python object's type, as messages show it: "str", "ndarray", "Tensor".
std::string type_name(py::handle value);
/// An int from a Python int or anything with __index__ (NumPy integers, one-element integer tensors); `what` names
/// the argument in the TypeError or InvalidArgumentError (too large for 64 bits) that refuses anything else.
int64_t to_int(py::handle value, const char* what);
/// A shape from an int, a sequence of ints (tuple, list, range, strata.Size), or a 1-D integer array or tensor;
/// `*sizes` calls pass a tuple that may hold one such sequence. At most kMaxDims dims; `what` names the argument.
Shape to_shape(py::handle sizes, const char* what = "size");
/// A shape whose sizes must all be sizes (no -1): what creation functions and layers take.
Shape to_sizes(py::handle sizes, const char* what = "size");
/// The dtype argument of a creation function: a strata dtype, or None for `fallback`.
DType to_dtype(py::handle dtype, DType fallback);
/// A device from a strata.device, a string ("cuda:0") or None (the CPU).
Device to_device(py::handle device);
/// A tensor argument, or the TypeError naming it (`what`) and saying what it accepts (a Tensor, or None when
/// `none_ok`, which gives an undefined tensor).
Tensor to_tensor(py::handle value, const char* what, bool none_ok = false);
/// A 0-dim tensor holding `value` on `like`'s device, so that ops taking two tensors take a number too.
Tensor scalar_like(const Scalar& value, const Tensor& like);

/// The part that turns Strata's errors into Python exceptions (errors.cpp).
void register_errors(py::module_& m);
/// Rewrites pybind11's argument errors of every function under `m` in Python's terms (errors.cpp, Note [Argument
/// errors in Python's terms]); called once every binding exists.
void rewrite_argument_errors(py::module_& m);
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
/// _adopt: Note [One Python object per tensor] (identity.cpp).
void register_identity(py::module_& m);
/// strata.RawKernel and the run-time compiler's functions (jit.cpp).
void register_jit(py::module_& m);
/// The TensorBoard event file writer (tensorboard.cpp).
void register_tensorboard(py::module_& m);
/// strata.amp: autocast's setting and GradScaler (amp.cpp).
void register_amp(py::module_& m);
/// strata.profiler: start, stop and the recording's result (profiler.cpp).
void register_profiler(py::module_& m);

}  // namespace strata::python
