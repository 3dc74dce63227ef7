// The Tensor class: properties, conversions, indexing and autograd, under PyTorch's names. The operators and math
// functions are in ops.cpp; NumPy and DLPack exchange in interop.cpp.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "bindings.h"
#include "strata/tensor/print.h"

namespace strata::python {
namespace {

// An integer index tensor along a dim of `size`, as PyTorch's advanced indexing reads it: negative values count
// from the end. On the CPU a value outside [-size, size) is an IndexError naming it; on a GPU, reading the values
// would wait for the device, so the index kernel's device-side assert reports it, as PyTorch's does.
Tensor wrap_index(const Tensor& index, int64_t size, int64_t dim) {
  Tensor idx = index.to(DType::I64);
  if (!idx.device().is_cpu()) return where(lt(idx, scalar_like(0, idx)), idx + size, idx);
  idx = idx.contiguous();
  if (idx.is_same(index)) idx = idx.clone();  // the caller's tensor stays as it was
  auto* values = static_cast<int64_t*>(idx.data_ptr());
  for (int64_t i = 0; i < idx.numel(); ++i) {
    STRATA_CHECK(values[i] >= -size && values[i] < size, IndexError,
                 "index {} is out of bounds for dimension {} with size {}", values[i], dim, size);
    if (values[i] < 0) values[i] += size;
  }
  return idx;
}

// A Python int index as int64; one too large for 64 bits is out of bounds anyway.
int64_t to_index(py::handle h, const Tensor& t, int64_t dim) {
  const auto index = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  STRATA_CHECK(overflow == 0, IndexError, "index {} is out of bounds for dimension {} with size {}",
               std::string(py::str(index)), dim, dim < t.dim() ? t.size(dim) : 0);
  return static_cast<int64_t>(v);
}

// A Python list in an index, as PyTorch reads it: ints are an int64 index tensor (x[:, [-1]] keeps the dim), bools a
// boolean mask, [] an empty int64 index. Its values are checked against the dim like an index tensor's.
py::object list_as_index(py::handle list) {
  if (py::len(list) == 0) return py::cast(empty({0}, TensorOptions(DType::I64)));
  // PyTorch (as NumPy once did) reads a list holding sequences, tensors, slices or None as a tuple of indices; a
  // list of lists here would mean something else, so it is refused rather than read either way.
  for (py::handle item : py::reinterpret_borrow<py::list>(list)) {
    STRATA_CHECK(!PySequence_Check(item.ptr()) && !py::isinstance<Tensor>(item) && !PySlice_Check(item.ptr()) &&
                     !item.is_none() && item.ptr() != Py_Ellipsis,
                 IndexError,
                 "a list used as an index must hold ints or bools, got a {} in it (PyTorch reads such a list as a "
                 "tuple of indices: write the tuple, or index with a tensor of several dims)",
                 type_name(item));
  }
  Tensor t = py::module_::import("strata").attr("tensor")(list).cast<Tensor>();
  STRATA_CHECK(is_integral(t.dtype()), IndexError, "a list used as an index must hold ints or bools, got {} values",
               t.dtype());
  return py::cast(std::move(t));
}

// Dims [begin, end) of a shape.
Shape dims_of(const Shape& shape, int64_t begin, int64_t end) {
  Shape part;
  for (int64_t i = begin; i < end; ++i) part.push_back(shape[static_cast<std::size_t>(i)]);
  return part;
}

// A boolean mask indexes the dims of t from d on that it covers, and must have their sizes exactly (no broadcast).
void check_mask(const Tensor& t, int64_t d, const Tensor& mask) {
  STRATA_CHECK(d + mask.dim() <= t.dim() && dims_of(t.shape(), d, d + mask.dim()) == mask.shape(), IndexError,
               "the boolean mask's shape {} does not match the shape {} of the dims it indexes (from dim {} of a "
               "tensor of shape {})",
               mask.shape(), dims_of(t.shape(), d, std::min(t.dim(), d + mask.dim())), d, t.shape());
}

// t[..., mask, ...]: the dims the mask covers become one, of the positions where it is true, in order (a copy, as
// in PyTorch). The mask is read on the host, as PyTorch's nonzero does: its count of trues is the result's shape.
Tensor select_masked(const Tensor& t, int64_t d, const Tensor& mask) {
  check_mask(t, d, mask);
  const Tensor host = mask.cpu().contiguous();
  const auto* values = static_cast<const std::uint8_t*>(host.data_ptr());  // bytes: any nonzero one is true
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < host.numel(); ++i) {
    if (values[i] != 0) positions.push_back(i);
  }
  Shape flat = dims_of(t.shape(), 0, d);
  flat.push_back(host.numel());
  for (int64_t s : dims_of(t.shape(), d + mask.dim(), t.dim())) flat.push_back(s);
  const auto count = static_cast<int64_t>(positions.size());
  return index_select(t.reshape(flat), d, tensor(positions, {count}, t.device()));
}

// t[..., index, ...] with an integer index tensor of any number of dims: the dim it indexes is replaced by the
// index's dims, as in PyTorch (x[strata.tensor([[0, 1]])] of a (3, 4) x has shape (1, 2, 4)).
Tensor select_indices(const Tensor& t, int64_t d, const Tensor& index) {
  STRATA_CHECK(d < t.dim(), IndexError, "too many indices for tensor of dimension {}", t.dim());
  // Wrapped before it is flattened: wrap_index copies a tensor it would change, but not a view of one.
  const Tensor wrapped = wrap_index(index, t.size(d), d);
  Tensor result = index_select(t, d, wrapped.reshape({index.numel()}).to(t.device()));
  if (index.dim() == 1) return result;
  Shape shape = dims_of(t.shape(), 0, d);
  for (int64_t s : index.shape()) shape.push_back(s);
  for (int64_t s : dims_of(t.shape(), d + 1, t.dim())) shape.push_back(s);
  return result.reshape(shape);
}

/// A boolean mask of an assignment t[..., mask, ...] = v: apply_index leaves its dims in the view, and the
/// assignment writes only where the mask is true.
struct AssignmentMask {
  Tensor mask;
  int64_t dim = 0;  // the first dim of the view that the mask covers
};

// What one index of t[...] does: a number picks (and drops) a dim, a slice keeps it, None adds one, an integer
// tensor or list gathers along it and a boolean mask picks the positions where it is true (both copies, as in
// PyTorch). For an assignment (`mask` given), a boolean mask is recorded there and its dims kept in the view.
Tensor apply_index(const Tensor& self, py::handle index, AssignmentMask* mask) {
  std::vector<py::object> items;
  if (py::isinstance<py::tuple>(index)) {
    for (py::handle h : py::reinterpret_borrow<py::tuple>(index))
      items.push_back(py::reinterpret_borrow<py::object>(h));
  } else {
    items.push_back(py::reinterpret_borrow<py::object>(index));
  }
  int64_t consuming = 0;
  int64_t advanced = 0;  // index tensors, lists and masks: each gathers, and PyTorch would pair several of them up
  for (py::object& h : items) {
    if (PyList_Check(h.ptr())) h = list_as_index(h);
    if (h.is_none() || h.ptr() == Py_Ellipsis) continue;
    if (py::isinstance<Tensor>(h)) {
      const Tensor& idx = h.cast<const Tensor&>();
      consuming += idx.dtype() == DType::Bool ? idx.dim() : 1;
      if (idx.dtype() == DType::Bool || idx.dim() > 0) ++advanced;
    } else {
      ++consuming;
    }
  }
  STRATA_CHECK(consuming <= self.dim(), IndexError, "too many indices for tensor of dimension {} ({} given)",
               self.dim(), consuming);
  // Note: PyTorch pairs several index tensors element by element (x[[0, 1], [2, 3]] is two elements) and moves
  // their dims; taking them one after another would give a different result, so they are refused.
  STRATA_CHECK(advanced <= 1, IndexError,
               "an index may hold at most one index tensor, list or boolean mask, got {}; index one dim at a time",
               advanced);
  const auto added = static_cast<int64_t>(items.size()) - consuming;
  STRATA_CHECK(self.dim() + added <= kMaxDims, IndexError,
               "the index adds {} dimensions to a tensor of {}; the result may have at most {}", added, self.dim(),
               kMaxDims);
  Tensor result = self;
  int64_t d = 0;
  bool seen_ellipsis = false;
  for (const py::object& h : items) {
    if (h.is_none()) {
      result = result.unsqueeze(d++);
    } else if (h.ptr() == Py_Ellipsis) {
      STRATA_CHECK(!seen_ellipsis, IndexError, "an index can only have a single ellipsis ('...')");
      seen_ellipsis = true;
      d += self.dim() - consuming;  // the dims that no other index names
    } else if (PySlice_Check(h.ptr())) {
      // PySlice_Unpack clamps bounds beyond 64 bits (t[:2**70] is t[:]), as Python's own sequences do.
      Py_ssize_t start = 0, stop = 0, step = 0;
      if (PySlice_Unpack(h.ptr(), &start, &stop, &step) != 0) throw py::error_already_set();
      STRATA_CHECK(step > 0, InvalidArgumentError, "slice step must be greater than zero, got {}", step);
      result = result.slice(d++, start, stop, step);
    } else if (py::isinstance<Tensor>(h)) {
      const Tensor& idx = h.cast<const Tensor&>();
      if (idx.dtype() == DType::Bool) {
        if (mask != nullptr) {
          check_mask(result, d, idx);
          *mask = AssignmentMask{idx, d};
        } else {
          result = select_masked(result, d, idx);
        }
        d += mask != nullptr ? idx.dim() : 1;
        continue;
      }
      STRATA_CHECK(is_integral(idx.dtype()), IndexError,
                   "tensors used as indices must be integer or boolean tensors, got {}", idx.dtype());
      if (idx.dim() == 0) {
        result = result.select(d, idx.item().to_int());
      } else {
        STRATA_CHECK(mask == nullptr, IndexError,
                     "assigning through an integer index tensor or list is not supported; index with ints, slices "
                     "or a boolean mask");
        result = select_indices(result, d, idx);
        d += idx.dim();
      }
    } else if (!PyBool_Check(h.ptr()) && (PyLong_Check(h.ptr()) || py::hasattr(h, "__index__"))) {
      result = result.select(d, to_index(h, result, d));
    } else {
      throw TypeError(
          "only integers, slices (`:`), ellipsis (`...`), None, lists of integers or bools, and integer or boolean "
          "tensors are valid indices, got " +
          type_name(h));
    }
  }
  return result;
}

// base[..., mask, ...] = value, where `view` is base indexed with the mask's dims kept: a number or one-element
// tensor goes to every position where the mask is true, a tensor that broadcasts to the dims after the mask to each
// of them (PyTorch also takes one value per true position, which would need masked_scatter: refused).
void assign_masked(const Tensor& base, const Tensor& view, const AssignmentMask& m, py::handle value) {
  Shape shape = m.mask.shape();
  for (int64_t i = m.dim + m.mask.dim(); i < view.dim(); ++i) shape.push_back(1);
  const Tensor mask = m.mask.to(view.device()).reshape(shape);  // broadcasts over the view's dims
  const bool records = grad_enabled() && base.requires_grad();
  if (!records && (PyBool_Check(value.ptr()) || PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr()))) {
    Tensor target = view;
    without_gil([&] { masked_fill_(target, mask, value.cast<Scalar>()); });
    return;
  }
  Tensor v =
      py::isinstance<Tensor>(value)
          ? value.cast<Tensor>()
          : py::module_::import("strata").attr("tensor")(value, py::arg("device") = view.device()).cast<Tensor>();
  const int64_t after = view.dim() - m.dim - m.mask.dim();
  STRATA_CHECK(v.numel() == 1 || v.dim() <= after, IndexError,
               "a value of shape {} cannot be assigned through a boolean mask of shape {} into a tensor of shape {}: "
               "it takes a number, a one-element tensor or one that broadcasts to the dims after the mask ({})",
               v.shape(), m.mask.shape(), view.shape(), dims_of(view.shape(), view.dim() - after, view.dim()));
  if (v.numel() == 1) v = v.reshape({});
  Tensor b = base;
  without_gil([&] { assign_view(b, view, where(mask, v.to(view.dtype()), view)); });
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple t(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) t[i] = py::int_(shape[i]);
  return t;
}

// A shape as strata.Size, the tuple subclass of strata/_tensor.py (PyTorch's torch.Size).
py::object size_of(const Shape& shape) {
  // Leaked on purpose, as the error classes are: it must outlive every tensor that asks during shutdown.
  static PyObject* size_class = py::object(py::module_::import("strata._tensor").attr("Size")).release().ptr();
  return py::reinterpret_borrow<py::object>(size_class)(shape_tuple(shape));
}

// t.to(...) as in PyTorch: any of a device (or its string), a dtype, another tensor (its device and dtype).
Tensor to(const Tensor& self, py::args args, py::object device, py::object dtype, bool non_blocking, bool copy) {
  std::optional<Device> to_device_;
  std::optional<DType> to_dtype_;
  for (py::handle a : args) {
    if (py::isinstance<DType>(a)) {
      to_dtype_ = a.cast<DType>();
    } else if (py::isinstance<Tensor>(a)) {
      to_device_ = a.cast<const Tensor&>().device();
      to_dtype_ = a.cast<const Tensor&>().dtype();
    } else if (PyUnicode_Check(a.ptr()) || py::isinstance<Device>(a)) {
      to_device_ = to_device(a);
    } else {
      throw TypeError(fmt::format(
          "to(): expected a device (a strata.device or a string such as 'cuda:0'), a dtype or a tensor, not {}",
          type_name(a)));
    }
  }
  if (!device.is_none()) to_device_ = to_device(device);
  if (!dtype.is_none()) to_dtype_ = to_dtype(dtype, DType::F32);
  Computing computing;
  Tensor result = self;
  if (to_device_ && to_dtype_ && !copy) {
    result = result.to(*to_device_, *to_dtype_, non_blocking);
  } else {
    if (to_device_) result = copy ? result.copy_to(*to_device_, non_blocking) : result.to(*to_device_, non_blocking);
    if (to_dtype_) result = result.to(*to_dtype_);
  }
  if (copy && result.is_same(self)) result = self.clone();
  return result;
}

int checked_cuda_index(py::handle device) {
  const int64_t index = to_int(device, "device");
  STRATA_CHECK(index >= 0 && index <= std::numeric_limits<int>::max(), InvalidArgumentError,
               "cuda(): device index must be non-negative, got {}", index);
  return static_cast<int>(index);
}

// A Python hook held by the graph, which backward runs and frees without the GIL: both take it back.
struct PythonHook {
  py::object function;
  bool removed = false;
};

std::shared_ptr<PythonHook> hold_hook(py::object function) {
  return std::shared_ptr<PythonHook>(new PythonHook{std::move(function)}, [](PythonHook* hook) {
    if (!Py_IsInitialized()) return;  // at exit: leaked, as Python leaks what it still holds
    py::gil_scoped_acquire gil;
    delete hook;
  });
}

/// What Tensor.register_hook returns: remove() turns the hook off (PyTorch's RemovableHandle).
struct HookHandle {
  std::shared_ptr<PythonHook> hook;
  void remove() const { hook->removed = true; }
};

void register_autograd(py::module_& m, py::class_<Tensor>& cls) {
  py::class_<HookHandle>(m, "_HookHandle", "Removes the hook it was returned for: handle.remove().")
      .def("remove", &HookHandle::remove)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](const HookHandle& h, py::args) { h.remove(); });
  cls.def(
      "register_hook",
      [](Tensor& t, py::object function) {
        if (!PyCallable_Check(function.ptr())) {
          throw py::type_error("register_hook: the hook must be callable, got " +
                               std::string(py::str(py::type::of(function).attr("__name__"))));
        }
        std::shared_ptr<PythonHook> hook = hold_hook(function);
        t.register_hook([hook](const Tensor& grad) -> Tensor {
          py::gil_scoped_acquire gil;
          if (hook->removed) return Tensor();
          py::object replaced = hook->function(grad);
          return replaced.is_none() ? Tensor() : to_tensor(replaced, "the value a hook returned", false);
        });
        return HookHandle{hook};
      },
      py::arg("hook"),
      "hook(grad) runs when this tensor's gradient is computed; a tensor it returns replaces the gradient.");
  cls.def(
      "retain_grad", [](const Tensor& t) { autograd::retain_grad(t); },
      "Keeps this result's gradient in .grad after backward, as leaves keep theirs.");
  cls.def_property_readonly("retains_grad", [](const Tensor& t) { return autograd::retains_grad(t); });
  m.def(
      "_autograd_grad",
      [](const std::vector<Tensor>& outputs, const std::vector<std::optional<Tensor>>& grad_outputs,
         const std::vector<Tensor>& inputs, bool retain_graph, bool allow_unused) {
        std::vector<Tensor> weights;
        for (const auto& g : grad_outputs) weights.push_back(g ? *g : Tensor());
        std::vector<Tensor> grads =
            without_gil([&] { return autograd::grad(outputs, weights, inputs, retain_graph, allow_unused); });
        py::list result;
        for (const Tensor& g : grads) result.append(g.defined() ? py::cast(g) : py::none());
        return result;
      },
      py::arg("outputs"), py::arg("grad_outputs"), py::arg("inputs"), py::arg("retain_graph"), py::arg("allow_unused"));
}

void check_one_value(const Tensor& t, const char* what) {
  STRATA_CHECK(t.numel() == 1, InvalidArgumentError,
               "{} of a tensor with {} values is ambiguous; only one-element tensors convert", what, t.numel());
}

}  // namespace

void register_ops(py::module_& m, py::object tensor_class);
void register_creation(py::module_& m);

void register_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor",
                         "An n-dimensional array on a device. Assignment shares the tensor, as in PyTorch; views "
                         "share its memory.");
  cls.def(py::init([](const Tensor& other) { return other; }), py::arg("other"),
          "Another handle to the same tensor (how strata.nn.Parameter wraps one).");
  cls.def_property_readonly("shape", [](const Tensor& t) { return size_of(t.shape()); });
  cls.def(
      "size",
      [](const Tensor& t, py::object dim) -> py::object {
        if (dim.is_none()) return size_of(t.shape());
        return py::int_(t.size(to_int(dim, "dim")));
      },
      py::arg("dim") = py::none());
  cls.def(
      "stride",
      [](const Tensor& t, py::object dim) -> py::object {
        if (dim.is_none()) return shape_tuple(t.strides());
        return py::int_(t.stride(to_int(dim, "dim")));
      },
      py::arg("dim") = py::none());
  cls.def_property_readonly("dtype", &Tensor::dtype);
  cls.def_property_readonly("device", &Tensor::device);
  cls.def_property_readonly("ndim", &Tensor::dim);
  cls.def_property_readonly("is_cuda", [](const Tensor& t) { return t.device().is_cuda(); });
  cls.def_property_readonly("is_cpu", [](const Tensor& t) { return t.device().is_cpu(); });
  cls.def_property_readonly("itemsize", &Tensor::element_size);
  cls.def_property_readonly("nbytes", [](const Tensor& t) { return t.numel() * t.element_size(); });
  cls.def("dim", &Tensor::dim);
  cls.def("numel", &Tensor::numel);
  cls.def("element_size", &Tensor::element_size);
  cls.def("is_contiguous", &Tensor::is_contiguous);
  cls.def("storage_offset", &Tensor::offset);
  cls.def("data_ptr", [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()); });
  cls.def("is_floating_point", [](const Tensor& t) { return is_floating(t.dtype()); });
  cls.def("is_pinned", &Tensor::is_pinned);
  cls.def("shares_storage", &Tensor::shares_storage, py::arg("other"),
          "True when both tensors are views of one memory.");
  cls.def("__len__", [](const Tensor& t) {
    if (t.dim() == 0) throw TypeError("len() of a 0-d tensor");
    return t.size(0);
  });
  cls.def("__iter__", [](const Tensor& t) {
    if (t.dim() == 0) throw TypeError("iteration over a 0-d tensor");
    py::list rows;
    for (int64_t i = 0; i < t.size(0); ++i) rows.append(t.select(0, i));
    return py::iter(rows);
  });
  cls.def("__repr__", [](const Tensor& t) {
    // Printing recurses once per dim; deeper tensors than a shape may have (made by unsqueeze upon unsqueeze)
    // print their shape alone.
    if (t.dim() > kMaxDims) {
      return fmt::format("tensor(<{} dims, not printed>, size={}, dtype={}, device='{}')", t.dim(), t.shape(),
                         t.dtype(), t.device());
    }
    // As PyTorch prints: tensor([...], dtype=..., device=..., grad_fn=...), rows aligned under the first.
    constexpr std::size_t kPrefix = sizeof("tensor(") - 1;
    std::string text = "tensor(" + without_gil([&] { return format_values(t, kPrefix); });
    if (t.numel() == 0 && t.dim() != 1) text += fmt::format(", size=({})", fmt::join(t.shape(), ", "));
    if (!t.device().is_cpu()) text += fmt::format(", device='{}'", t.device());
    if (t.dtype() != DType::F32 && t.dtype() != DType::I64 && t.dtype() != DType::Bool) {
      text += ", dtype=" + std::string(py::repr(py::cast(t.dtype())));
    }
    if (!t.is_leaf()) {
      text += fmt::format(", grad_fn=<{}>", t.grad_fn_name());
    } else if (t.requires_grad()) {
      text += ", requires_grad=True";
    }
    return text + ")";
  });
  cls.def("__hash__", [](py::handle self) { return reinterpret_cast<std::intptr_t>(self.ptr()); });
  cls.def(
      "item", [](const Tensor& t) { return without_gil([&] { return t.item(); }); },
      "The value of a one-element tensor as a Python number (a synchronisation on a GPU).");
  cls.def("__bool__", [](const Tensor& t) {
    check_one_value(t, "the truth value");
    return t.item().to_bool();
  });
  cls.def("__float__", [](const Tensor& t) {
    check_one_value(t, "float()");
    return t.item().to_double();
  });
  cls.def("__int__", [](const Tensor& t) {
    check_one_value(t, "int()");
    return t.item().to_int();
  });
  cls.def("__index__", [](const Tensor& t) {
    STRATA_CHECK(is_integral(t.dtype()) && t.numel() == 1, DTypeError,
                 "only one-element integer tensors can be used as an index, not {} of {} values", t.dtype(), t.numel());
    return t.item().to_int();
  });

  cls.def("__getitem__", [](const Tensor& t, py::handle index) { return apply_index(t, index, nullptr); });
  // Through assign_view, so that autograd records the write into t (Note [In-place ops and autograd]).
  cls.def("__setitem__", [](const Tensor& t, py::handle index, py::handle value) {
    Tensor base = t;  // the same tensor: its history is what the assignment rebases
    AssignmentMask mask;
    Tensor target = apply_index(t, index, &mask);
    if (mask.mask.defined()) return assign_masked(base, target, mask, value);
    Tensor v;
    if (py::isinstance<Tensor>(value)) {
      v = value.cast<Tensor>();
    } else if (PyBool_Check(value.ptr()) || PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr())) {
      if (!(grad_enabled() && t.requires_grad())) {
        target.fill_(value.cast<Scalar>());
        return;
      }
      v = full({}, value.cast<Scalar>(), TensorOptions(t.dtype()).device(t.device()));
    } else {
      // Lists, arrays, NumPy scalars: through strata.tensor, on the target's device.
      v = py::module_::import("strata").attr("tensor")(value, py::arg("device") = target.device()).cast<Tensor>();
    }
    without_gil([&] { assign_view(base, std::move(target), v); });
  });

  // --- devices and dtypes ---
  cls.def("to", &to, py::arg("device") = py::none(), py::arg("dtype") = py::none(), py::arg("non_blocking") = false,
          py::arg("copy") = false,
          "The tensor on another device and/or dtype: this very tensor when nothing changes, else a copy.");
  cls.def(
      "copy_to", [](const Tensor& t, Device d, bool nb) { return without_gil([&] { return t.copy_to(d, nb); }); },
      py::arg("device"), py::arg("non_blocking") = false, "Always a new copy on `device`; differentiable.");
  cls.def("cpu", [](const Tensor& t) { return without_gil([&] { return t.cpu(); }); });
  cls.def(
      "cuda",
      [](const Tensor& t, py::object device, bool nb) {
        Device d = device.is_none()                   ? Device(DeviceType::CUDA)
                   : py::isinstance<py::int_>(device) ? Device(DeviceType::CUDA, checked_cuda_index(device))
                                                      : to_device(device);
        return without_gil([&] { return t.to(d, nb); });
      },
      py::arg("device") = py::none(), py::arg("non_blocking") = false);
  cls.def("pin_memory", [](const Tensor& t) { return without_gil([&] { return t.pin_memory(); }); });
  struct Cast {
    const char* name;
    DType dtype;
  };
  for (Cast c :
       {Cast{"float", DType::F32}, Cast{"double", DType::F64}, Cast{"half", DType::F16}, Cast{"bfloat16", DType::BF16},
        Cast{"long", DType::I64}, Cast{"int", DType::I32}, Cast{"bool", DType::Bool}, Cast{"byte", DType::U8}}) {
    const DType dtype = c.dtype;
    cls.def(c.name, [dtype](const Tensor& t) { return t.to(dtype); });
  }
  cls.def(
      "type_as", [](const Tensor& t, const Tensor& other) { return t.to(other.dtype()); }, py::arg("other"));
  cls.def("clone", [](const Tensor& t) { return without_gil([&] { return t.clone(); }); });
  cls.def("contiguous", [](const Tensor& t) { return without_gil([&] { return t.contiguous(); }); });
  cls.def(
      "copy_",
      [](py::object self, const Tensor& src) {
        Tensor& t = self.cast<Tensor&>();
        without_gil([&] { t.copy_(src); });
        return self;
      },
      py::arg("src"));
  cls.def(
      "fill_",
      [](py::object self, const Scalar& value) {
        self.cast<Tensor&>().fill_(value);
        return self;
      },
      py::arg("value"));
  cls.def("zero_", [](py::object self) {
    self.cast<Tensor&>().fill_(0);
    return self;
  });

  // --- autograd ---
  cls.def_property("requires_grad", &Tensor::requires_grad, [](Tensor& t, bool on) { t.requires_grad_(on); });
  cls.def(
      "requires_grad_",
      [](py::object self, bool on) {
        self.cast<Tensor&>().requires_grad_(on);
        return self;
      },
      py::arg("requires_grad") = true);
  cls.def_property(
      "grad",
      [](const Tensor& t) -> py::object {
        Tensor g = t.grad();
        return g.defined() ? py::cast(g) : py::none();
      },
      [](Tensor& t, py::object g) { t.set_grad(to_tensor(g, "assigned grad", true)); });
  cls.def_property_readonly("is_leaf", &Tensor::is_leaf);
  cls.def_property_readonly(
      "grad_fn",
      [](const Tensor& t) -> py::object {
        std::string name = t.grad_fn_name();
        return name.empty() ? py::object(py::none()) : py::object(py::str(name));
      },
      "The name of the op that made this tensor, or None for a leaf.");
  cls.def_property(
      "data", &Tensor::detach,
      [](Tensor& t, py::object value) {
        const Tensor other = to_tensor(value, "data");
        // PyTorch's rule: a tensor that requires grad keeps a dtype that gradients exist for.
        STRATA_CHECK(!t.requires_grad() || is_floating(other.dtype()), DTypeError,
                     "data set to a tensor that requires gradients must be floating point, got {}", other.dtype());
        replacing_data("data", [&] { t.set_data(other); });
      },
      "The same memory cut from the graph; assigning replaces the data keeping the tensor's identity.");
  cls.def("detach", &Tensor::detach);
  cls.def(
      "backward",
      [](const Tensor& t, py::object gradient, bool retain_graph) {
        Tensor g = to_tensor(gradient, "backward(): gradient", true);
        without_gil([&] { t.backward(g, retain_graph); });
      },
      py::arg("gradient") = py::none(), py::arg("retain_graph") = false,
      "Computes the gradients of this tensor with respect to the leaves that require grad.");
  register_autograd(m, cls);

  register_ops(m, cls);
  register_creation(m);
}

}  // namespace strata::python
