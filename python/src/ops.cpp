// Operators, math and view functions, as Tensor methods and as strata.<name> functions, and the creation
// functions. A number where PyTorch takes one becomes a 0-dim tensor on the other operand's device.
#include <pybind11/numpy.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "strata/tensor/random.h"

namespace strata::python {
namespace {

/// Binds f as a method of the Tensor class (what class_::def does, for a class held as an object).
template <typename F, typename... Extra>
void def_method(py::object& cls, const char* name, F&& f, const Extra&... extra) {
  py::cpp_function cf(std::forward<F>(f), py::name(name), py::is_method(cls),
                      py::sibling(py::getattr(cls, name, py::none())), extra...);
  py::setattr(cls, name, cf);
}

/// Binds f both as strata.<name>(input, ...) and input.<name>(...); `extra` names the arguments after the tensor.
template <typename F, typename... Extra>
void def_both(py::module_& m, py::object& cls, const char* name, F f, const Extra&... extra) {
  if constexpr (sizeof...(Extra) == 0) {
    m.def(name, f);
  } else {
    m.def(name, f, py::arg("input"), extra...);
  }
  def_method(cls, name, f, extra...);
}

std::vector<int64_t> to_dims(py::handle dim) {
  if (dim.is_none()) return {};
  return to_shape(dim, "dim").vec();
}

using Binary = Tensor (*)(const Tensor&, const Tensor&);

/// A NumPy array on either side of an operator becomes a tensor on the other operand's device, so that the result is
/// a tensor, as in PyTorch (NumPy defers to Tensor's reflected operators: its __array_priority__ is higher). Other
/// objects get NotImplemented, so that Python tries their side or raises its TypeError.
template <Binary op>
void def_with_arrays(py::object& cls, const char* name, const char* reflected) {
  const auto with_array = [](bool array_first) {
    return [array_first](const Tensor& a, py::handle b) -> py::object {
      if (!py::isinstance<py::array>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
      const py::object converted = py::module_::import("strata").attr("tensor")(b, py::arg("device") = a.device());
      const Tensor t = converted.template cast<Tensor>();
      return py::cast(array_first ? op(t, a) : op(a, t));
    };
  };
  def_method(cls, name, with_array(false), py::is_operator());
  if (reflected != nullptr) def_method(cls, reflected, with_array(true), py::is_operator());
}

/// The four forms of a binary operator: tensor-tensor, tensor-number, and reflected (number-tensor).
template <Binary op>
void def_binary(py::object& cls, const char* name, const char* reflected) {
  def_method(
      cls, name, [](const Tensor& a, const Tensor& b) { return op(a, b); }, py::is_operator());
  def_method(
      cls, name, [](const Tensor& a, const Scalar& b) { return op(a, scalar_like(b, a)); }, py::is_operator());
  if (reflected != nullptr) {
    def_method(
        cls, reflected, [](const Tensor& a, const Scalar& b) { return op(scalar_like(b, a), a); }, py::is_operator());
  }
  def_with_arrays<op>(cls, name, reflected);
}

using WithScalar = Tensor (*)(const Tensor&, const Scalar&);
using ScalarFirst = Tensor (*)(const Scalar&, const Tensor&);

template <Binary op, WithScalar with_scalar, ScalarFirst reflected_op>
void def_arithmetic(py::object& cls, const char* name, const char* reflected) {
  def_method(
      cls, name, [](const Tensor& a, const Tensor& b) { return op(a, b); }, py::is_operator());
  def_method(
      cls, name, [](const Tensor& a, const Scalar& b) { return with_scalar(a, b); }, py::is_operator());
  def_method(
      cls, reflected, [](const Tensor& a, const Scalar& b) { return reflected_op(b, a); }, py::is_operator());
  def_with_arrays<op>(cls, name, reflected);
}

using InPlace = Tensor& (*)(Tensor&, const Tensor&);

Tensor& add_one(Tensor& a, const Tensor& b) { return add_(a, b); }
Tensor& sub_one(Tensor& a, const Tensor& b) { return sub_(a, b); }

template <InPlace op>
void def_in_place(py::object& cls, const char* name, const char* dunder) {
  auto with_tensor = [](py::object self, const Tensor& b) {
    op(self.cast<Tensor&>(), b);
    return self;
  };
  auto with_number = [](py::object self, const Scalar& b) {
    Tensor& a = self.cast<Tensor&>();
    op(a, scalar_like(b, a));
    return self;
  };
  def_method(cls, name, with_tensor);
  def_method(cls, name, with_number);
  // Not operators: an operator's failed match returns NotImplemented, and Python then runs `t = t + x`, which
  // NumPy answers for an array, making t an array. In PyTorch too `t += x` raises for what it cannot take.
  def_method(cls, dunder, with_tensor);
  def_method(cls, dunder, with_number);
}

void register_operators(py::object& cls) {
  // + - * / with a number use the C++ operators that take a Scalar: no 0-dim tensor is made per call.
  def_arithmetic < static_cast<Binary>(&operator+), &operator+, &operator+>(cls, "__add__", "__radd__");
  def_arithmetic<static_cast<Binary>(&operator-), &operator-, (&operator-)>(cls, "__sub__", "__rsub__");
  def_arithmetic < static_cast<Binary>(&operator*), &operator*, &operator*>(cls, "__mul__", "__rmul__");
  def_arithmetic < static_cast<Binary>(&operator/), &operator/, &operator/>(cls, "__truediv__", "__rtruediv__");
  def_binary<static_cast<Binary>(&pow)>(cls, "__pow__", "__rpow__");
  def_binary<&eq>(cls, "__eq__", nullptr);
  def_binary<&ne>(cls, "__ne__", nullptr);
  def_binary<&lt>(cls, "__lt__", nullptr);
  def_binary<&le>(cls, "__le__", nullptr);
  def_binary<&gt>(cls, "__gt__", nullptr);
  def_binary<&ge>(cls, "__ge__", nullptr);
  def_binary<&logical_and>(cls, "__and__", "__rand__");
  def_binary<&logical_or>(cls, "__or__", "__ror__");
  def_binary<&logical_xor>(cls, "__xor__", "__rxor__");
  def_method(
      cls, "__matmul__", [](const Tensor& a, const Tensor& b) { return without_gil([&] { return matmul(a, b); }); },
      py::is_operator());
  def_method(
      cls, "__neg__", [](const Tensor& a) { return neg(a); }, py::is_operator());
  def_method(
      cls, "__abs__", [](const Tensor& a) { return abs(a); }, py::is_operator());
  def_method(
      cls, "__invert__", [](const Tensor& a) { return logical_not(a); }, py::is_operator());
  def_in_place<&add_one>(cls, "add_", "__iadd__");
  def_in_place<&sub_one>(cls, "sub_", "__isub__");
  def_in_place<&mul_>(cls, "mul_", "__imul__");
  def_in_place<&div_>(cls, "div_", "__itruediv__");
}

void register_math(py::module_& m, py::object& cls) {
  using Unary = Tensor (*)(const Tensor&);
  struct Named {
    const char* name;
    Unary f;
  };
  for (Named u : {Named{"neg", &neg}, Named{"abs", &abs}, Named{"exp", &exp}, Named{"log", &log}, Named{"sqrt", &sqrt},
                  Named{"rsqrt", &rsqrt}, Named{"tanh", &tanh}, Named{"sigmoid", &sigmoid}, Named{"relu", &relu},
                  Named{"sin", &sin}, Named{"cos", &cos}, Named{"erf", &erf}, Named{"logical_not", &logical_not}}) {
    const Unary f = u.f;
    def_both(m, cls, u.name, [f](const Tensor& a) { return f(a); });
  }
  struct NamedBinary {
    const char* name;
    Binary f;
  };
  for (NamedBinary b : {NamedBinary{"mul", &mul}, NamedBinary{"div", &div}, NamedBinary{"maximum", &maximum},
                        NamedBinary{"minimum", &minimum}, NamedBinary{"eq", &eq}, NamedBinary{"ne", &ne},
                        NamedBinary{"lt", &lt}, NamedBinary{"le", &le}, NamedBinary{"gt", &gt}, NamedBinary{"ge", &ge},
                        NamedBinary{"logical_and", &logical_and}, NamedBinary{"logical_or", &logical_or},
                        NamedBinary{"logical_xor", &logical_xor}}) {
    const Binary f = b.f;
    def_both(m, cls, b.name, [f](const Tensor& a, const Tensor& o) { return f(a, o); });
    def_both(m, cls, b.name, [f](const Tensor& a, const Scalar& o) { return f(a, scalar_like(o, a)); });
  }
  def_both(
      m, cls, "add", [](const Tensor& a, const Tensor& b, const Scalar& alpha) { return add(a, b, alpha); },
      py::arg("other"), py::kw_only(), py::arg("alpha") = 1);
  def_both(
      m, cls, "sub", [](const Tensor& a, const Tensor& b, const Scalar& alpha) { return sub(a, b, alpha); },
      py::arg("other"), py::kw_only(), py::arg("alpha") = 1);
  def_both(m, cls, "add", [](const Tensor& a, const Scalar& b) { return a + b; });
  def_both(m, cls, "sub", [](const Tensor& a, const Scalar& b) { return a - b; });
  def_both(m, cls, "pow", [](const Tensor& a, const Scalar& e) { return pow(a, e); });
  def_both(m, cls, "pow", [](const Tensor& a, const Tensor& e) { return pow(a, e); });
  def_both(
      m, cls, "clamp",
      [](const Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi) { return clamp(a, lo, hi); },
      py::arg("min") = py::none(), py::arg("max") = py::none());
  def_both(
      m, cls, "gelu", [](const Tensor& a, const std::string& approximate) { return gelu(a, approximate); },
      py::kw_only(), py::arg("approximate") = "none");
  def_both(m, cls, "where", [](const Tensor& c, const Tensor& a, const Tensor& b) { return where(c, a, b); });
  m.def("where", [](const Tensor& c, const Tensor& a, const Scalar& b) { return where(c, a, scalar_like(b, a)); });
  for (const char* name : {"matmul", "mm", "bmm"}) {
    const Binary f = std::string(name) == "matmul" ? &matmul : std::string(name) == "mm" ? &mm : &bmm;
    def_both(m, cls, name, [f](const Tensor& a, const Tensor& b) { return without_gil([&] { return f(a, b); }); });
  }
  m.def(
      "addmm",
      [](const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
        return without_gil([&] { return addmm(bias, a, b, beta, alpha); });
      },
      py::arg("input"), py::arg("mat1"), py::arg("mat2"), py::kw_only(), py::arg("beta") = 1, py::arg("alpha") = 1);
}

void register_reductions(py::module_& m, py::object& cls) {
  using Reduce = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool);
  struct Named {
    const char* name;
    Reduce f;
  };
  for (Named r : {Named{"sum", &sum}, Named{"mean", &mean}}) {
    const Reduce f = r.f;
    def_both(
        m, cls, r.name, [f](const Tensor& a, py::object dim, bool keepdim) { return f(a, to_dims(dim), keepdim); },
        py::arg("dim") = py::none(), py::arg("keepdim") = false);
  }
  // max/min over one dim give (values, indices), as in PyTorch; over all dims, the value.
  struct Extreme {
    const char* name;
    Reduce f;
    Tensor (*arg)(const Tensor&, std::optional<int64_t>, bool);
  };
  for (Extreme e : {Extreme{"max", &max, &argmax}, Extreme{"min", &min, &argmin}}) {
    const Extreme x = e;
    // The two-tensor form first: the other form's `dim` takes any object, a tensor too.
    def_both(m, cls, e.name,
             [x](const Tensor& a, const Tensor& b) { return x.f == &max ? maximum(a, b) : minimum(a, b); });
    def_both(
        m, cls, e.name,
        [x](const Tensor& a, py::object dim, bool keepdim) -> py::object {
          if (dim.is_none()) return py::cast(x.f(a, {}, keepdim));
          const int64_t d = to_int(dim, "dim");
          return py::make_tuple(x.f(a, {d}, keepdim), x.arg(a, d, keepdim));
        },
        py::arg("dim") = py::none(), py::arg("keepdim") = false);
  }
  def_both(
      m, cls, "argmax", [](const Tensor& a, std::optional<int64_t> dim, bool k) { return argmax(a, dim, k); },
      py::arg("dim") = py::none(), py::arg("keepdim") = false);
  def_both(
      m, cls, "argmin", [](const Tensor& a, std::optional<int64_t> dim, bool k) { return argmin(a, dim, k); },
      py::arg("dim") = py::none(), py::arg("keepdim") = false);
  def_both(
      m, cls, "var",
      [](const Tensor& a, py::object dim, bool unbiased, bool keepdim) {
        return var(a, to_dims(dim), unbiased, keepdim);
      },
      py::arg("dim") = py::none(), py::arg("unbiased") = true, py::arg("keepdim") = false);
  def_both(
      m, cls, "norm",
      [](const Tensor& a, double p, py::object dim, bool keepdim) { return norm(a, p, to_dims(dim), keepdim); },
      py::arg("p") = 2.0, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  def_both(
      m, cls, "logsumexp",
      [](const Tensor& a, py::object dim, bool keepdim) { return logsumexp(a, to_dims(dim), keepdim); }, py::arg("dim"),
      py::arg("keepdim") = false);
  def_both(
      m, cls, "softmax", [](const Tensor& a, int64_t dim) { return softmax(a, dim); }, py::arg("dim"));
  def_both(
      m, cls, "log_softmax", [](const Tensor& a, int64_t dim) { return log_softmax(a, dim); }, py::arg("dim"));
}

void register_views(py::module_& m, py::object& cls) {
  def_method(cls, "reshape", [](const Tensor& a, py::args shape) { return a.reshape(to_shape(shape)); });
  m.def("reshape", [](const Tensor& a, py::object shape) { return a.reshape(to_shape(shape)); });
  def_method(cls, "view", [](const Tensor& a, py::args shape) { return a.view(to_shape(shape)); });
  def_both(
      m, cls, "flatten", [](const Tensor& a, int64_t s, int64_t e) { return a.flatten(s, e); },
      py::arg("start_dim") = 0, py::arg("end_dim") = -1);
  def_both(m, cls, "transpose", [](const Tensor& a, int64_t d0, int64_t d1) { return a.transpose(d0, d1); });
  // PyTorch's t(): a 0-D or 1-D tensor as it is (a view), a matrix transposed, anything else refused.
  def_both(m, cls, "t", [](const Tensor& a) {
    STRATA_CHECK(a.dim() <= 2, ShapeError,
                 "t() expects a tensor with at most 2 dimensions, but it has {}; use transpose(dim0, dim1)", a.dim());
    if (a.dim() == 2) return a.t();
    return a.dim() == 1 ? a.narrow(0, 0, a.size(0)) : a.view(a.shape());
  });
  def_method(cls, "permute", [](const Tensor& a, py::args dims) { return a.permute(to_shape(dims)); });
  m.def("permute", [](const Tensor& a, py::object dims) { return a.permute(to_shape(dims)); });
  cls.attr("T") = py::cpp_function([](const Tensor& a) {
    Shape dims;
    for (int64_t d = a.dim() - 1; d >= 0; --d) dims.push_back(d);
    return a.permute(dims);
  });
  cls.attr("T") = py::module_::import("builtins").attr("property")(cls.attr("T"));
  def_both(
      m, cls, "squeeze", [](const Tensor& a, std::optional<int64_t> d) { return d ? a.squeeze(*d) : a.squeeze(); },
      py::arg("dim") = py::none());
  def_both(
      m, cls, "unsqueeze", [](const Tensor& a, int64_t d) { return a.unsqueeze(d); }, py::arg("dim"));
  def_method(cls, "expand", [](const Tensor& a, py::args sizes) { return a.expand(to_shape(sizes)); });
  def_method(cls, "expand_as", [](const Tensor& a, const Tensor& o) { return a.expand_as(o); });
  def_both(
      m, cls, "narrow", [](const Tensor& a, int64_t d, int64_t s, int64_t n) { return a.narrow(d, s, n); },
      py::arg("dim"), py::arg("start"), py::arg("length"));
  def_both(
      m, cls, "select", [](const Tensor& a, int64_t d, int64_t i) { return a.select(d, i); }, py::arg("dim"),
      py::arg("index"));
  def_both(
      m, cls, "index_select", [](const Tensor& a, int64_t d, const Tensor& i) { return index_select(a, d, i); },
      py::arg("dim"), py::arg("index"));
  def_both(
      m, cls, "gather", [](const Tensor& a, int64_t d, const Tensor& i) { return gather(a, d, i); }, py::arg("dim"),
      py::arg("index"));
  def_both(
      m, cls, "scatter_add",
      [](const Tensor& a, int64_t d, const Tensor& i, const Tensor& s) { return scatter_add(a, d, i, s); },
      py::arg("dim"), py::arg("index"), py::arg("src"));
  m.def(
      "one_hot", [](const Tensor& labels, int64_t n) { return one_hot(labels, n); }, py::arg("tensor"),
      py::arg("num_classes"));
  m.def(
      "cat", [](const std::vector<Tensor>& ts, int64_t dim) { return without_gil([&] { return cat(ts, dim); }); },
      py::arg("tensors"), py::arg("dim") = 0);
  m.def(
      "stack", [](const std::vector<Tensor>& ts, int64_t dim) { return without_gil([&] { return stack(ts, dim); }); },
      py::arg("tensors"), py::arg("dim") = 0);
}

/// masked_fill, triu/tril (with their in-place forms), split, chunk, topk and multinomial: the ops
/// Transformers and sampling need.
void register_selection(py::module_& m, py::object& cls) {
  // The tensor form first, so that a 0-dim tensor value (which may require grad) is not read as a number.
  def_both(
      m, cls, "masked_fill",
      [](const Tensor& a, const Tensor& mask, const Tensor& v) { return masked_fill(a, mask, v); }, py::arg("mask"),
      py::arg("value"));
  def_both(
      m, cls, "masked_fill",
      [](const Tensor& a, const Tensor& mask, const Scalar& v) { return masked_fill(a, mask, v); }, py::arg("mask"),
      py::arg("value"));
  def_method(
      cls, "masked_fill_",
      [](py::object self, const Tensor& mask, const Tensor& v) {
        masked_fill_(self.cast<Tensor&>(), mask, v);
        return self;
      },
      py::arg("mask"), py::arg("value"));
  def_method(
      cls, "masked_fill_",
      [](py::object self, const Tensor& mask, const Scalar& v) {
        masked_fill_(self.cast<Tensor&>(), mask, v);
        return self;
      },
      py::arg("mask"), py::arg("value"));
  def_both(
      m, cls, "triu", [](const Tensor& a, int64_t diagonal) { return triu(a, diagonal); }, py::arg("diagonal") = 0);
  def_both(
      m, cls, "tril", [](const Tensor& a, int64_t diagonal) { return tril(a, diagonal); }, py::arg("diagonal") = 0);
  def_method(
      cls, "triu_",
      [](py::object self, int64_t diagonal) {
        triu_(self.cast<Tensor&>(), diagonal);
        return self;
      },
      py::arg("diagonal") = 0);
  def_method(
      cls, "tril_",
      [](py::object self, int64_t diagonal) {
        tril_(self.cast<Tensor&>(), diagonal);
        return self;
      },
      py::arg("diagonal") = 0);
  // split(tensor, split_size_or_sections, dim): an int is the size of each part, a sequence the sizes of the parts.
  const auto split_parts = [](const Tensor& a, py::object sizes, int64_t dim) {
    std::vector<Tensor> parts;
    if (py::isinstance<py::int_>(sizes) || py::hasattr(sizes, "__index__")) {
      parts = split(a, to_int(sizes, "split_size_or_sections"), dim);
    } else {
      const Shape s = to_shape(sizes, "split_size_or_sections");
      parts = split_with_sizes(a, std::vector<int64_t>(s.begin(), s.end()), dim);
    }
    return py::tuple(py::cast(parts));
  };
  m.def("split", split_parts, py::arg("tensor"), py::arg("split_size_or_sections"), py::arg("dim") = 0);
  def_method(cls, "split", split_parts, py::arg("split_size"), py::arg("dim") = 0);
  def_both(
      m, cls, "chunk",
      [](const Tensor& a, int64_t chunks, int64_t dim) { return py::tuple(py::cast(chunk(a, chunks, dim))); },
      py::arg("chunks"), py::arg("dim") = 0);
  // topk's result is PyTorch's named tuple (values, indices), strata.return_types.topk.
  def_both(
      m, cls, "topk",
      [](const Tensor& a, int64_t k, int64_t dim, bool largest, bool sorted) {
        auto [values, indices] = topk(a, k, dim, largest, sorted);
        const py::object result_type = py::module_::import("strata._composed._registry")
                                           .attr("named")("topk", py::make_tuple("values", "indices"));
        return result_type(values, indices);
      },
      py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true, py::arg("sorted") = true);
  def_both(
      m, cls, "multinomial",
      [](const Tensor& a, int64_t num_samples, bool replacement, Generator* generator) {
        return multinomial(a, num_samples, replacement, generator);
      },
      py::arg("num_samples"), py::arg("replacement") = false, py::kw_only(), py::arg("generator") = py::none());
}

/// Applies the keyword arguments every creation function takes.
Tensor finish(Tensor t, bool requires_grad) {
  if (requires_grad) t.requires_grad_(true);
  return t;
}

TensorOptions options(py::handle dtype, py::handle device, DType fallback = DType::F32) {
  return TensorOptions().dtype(to_dtype(dtype, fallback)).device(to_device(device));
}

}  // namespace

void register_creation(py::module_& m) {
  using Make = Tensor (*)(const Shape&, TensorOptions);
  struct Named {
    const char* name;
    Make f;
  };
  for (Named n : {Named{"empty", &empty}, Named{"zeros", &zeros}, Named{"ones", &ones}, Named{"rand", &rand},
                  Named{"randn", &randn}}) {
    const Make f = n.f;
    m.def(
        n.name,
        [f](py::args size, py::object dtype, py::object device, bool requires_grad) {
          return finish(f(to_sizes(size), options(dtype, device)), requires_grad);
        },
        py::arg("dtype") = py::none(), py::arg("device") = py::none(), py::arg("requires_grad") = false);
  }
  m.def(
      "full",
      [](py::object size, const Scalar& value, py::object dtype, py::object device, bool requires_grad) {
        return finish(full(to_sizes(size), value, options(dtype, device, value.default_dtype())), requires_grad);
      },
      py::arg("size"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  m.def(
      "arange",
      [](const Scalar& a, std::optional<Scalar> b, const Scalar& step, py::object dtype, py::object device,
         bool requires_grad) {
        const bool floating = a.is_floating() || (b && b->is_floating()) || step.is_floating();
        TensorOptions o = options(dtype, device, floating ? DType::F32 : DType::I64);
        Tensor t = b ? arange(a, *b, step, o) : arange(Scalar(0), a, step, o);
        return finish(t, requires_grad);
      },
      py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1, py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  m.def(
      "linspace",
      [](double start, double end, int64_t steps, py::object dtype, py::object device, bool rg) {
        return finish(linspace(start, end, steps, options(dtype, device)), rg);
      },
      py::arg("start"), py::arg("end"), py::arg("steps"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  m.def(
      "eye",
      [](int64_t n, std::optional<int64_t> cols, py::object dtype, py::object device, bool rg) {
        return finish(eye(n, cols.value_or(-1), options(dtype, device)), rg);
      },
      py::arg("n"), py::arg("m") = py::none(), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  m.def(
      "randint",
      [](int64_t low, int64_t high, py::object size, py::object dtype, py::object device) {
        return randint(low, high, to_sizes(size), options(dtype, device, DType::I64));
      },
      py::arg("low"), py::arg("high"), py::arg("size"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none());
  // PyTorch's other form, from 0 (nanoGPT's train.py: torch.randint(len(data) - block_size, (batch_size,))). Its
  // size must be a sequence, so that randint(5, 10), which PyTorch refuses, is not read as ten values below 5.
  m.def(
      "randint",
      [](int64_t high, py::object size, py::object dtype, py::object device) {
        STRATA_CHECK(PySequence_Check(size.ptr()) && !PyUnicode_Check(size.ptr()), TypeError,
                     "randint(high, size): size must be a tuple of ints, got {}", type_name(size));
        return randint(0, high, to_sizes(size), options(dtype, device, DType::I64));
      },
      py::arg("high"), py::arg("size"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def(
      "scalar_tensor",
      [](const Scalar& v, py::object dtype, py::object device) {
        return scalar_tensor(v, options(dtype, device, v.default_dtype()));
      },
      py::arg("value"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  using Like = Tensor (*)(const Shape&, TensorOptions);
  struct NamedLike {
    const char* name;
    Like f;
  };
  for (NamedLike n : {NamedLike{"empty_like", &empty}, NamedLike{"zeros_like", &zeros}, NamedLike{"ones_like", &ones},
                      NamedLike{"rand_like", &rand}, NamedLike{"randn_like", &randn}}) {
    const Like f = n.f;
    m.def(
        n.name,
        [f](const Tensor& t, py::object dtype, py::object device, bool rg) {
          TensorOptions o = TensorOptions()
                                .dtype(to_dtype(dtype, t.dtype()))
                                .device(device.is_none() ? t.device() : to_device(device));
          return finish(f(t.shape(), o), rg);
        },
        py::arg("input"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
        py::arg("requires_grad") = false);
  }
  m.def(
      "full_like",
      [](const Tensor& t, const Scalar& v, py::object dtype, py::object device, bool rg) {
        TensorOptions o =
            TensorOptions().dtype(to_dtype(dtype, t.dtype())).device(device.is_none() ? t.device() : to_device(device));
        return finish(full(t.shape(), v, o), rg);
      },
      py::arg("input"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
}

void register_ops(py::module_& m, py::object tensor_class) {
  register_operators(tensor_class);
  register_math(m, tensor_class);
  register_reductions(m, tensor_class);
  register_views(m, tensor_class);
  register_selection(m, tensor_class);
}

}  // namespace strata::python
