// strata._C.nn: the C++ layers (which strata.nn wraps in Python modules), nn.functional, and strata._C.optim:
// the optimizers and learning-rate schedulers. Anything that computes runs without the GIL.
#include <string>
#include <vector>

#include "bindings.h"

namespace strata::python {
namespace {

namespace F = nn::functional;

F::Pair to_pair(py::handle v) {
  if (py::isinstance<py::int_>(v)) return F::Pair(v.cast<int64_t>());
  auto seq = v.cast<std::vector<int64_t>>();
  if (seq.size() != 2)
    throw py::value_error("expected an int or a pair of ints, got " + std::to_string(seq.size()) + " values");
  return F::Pair(seq[0], seq[1]);
}

std::optional<F::Pair> to_optional_pair(py::handle v) {
  return v.is_none() ? std::nullopt : std::optional<F::Pair>(to_pair(v));
}

F::Reduction to_reduction(const std::string& r) {
  if (r == "mean") return F::Reduction::Mean;
  if (r == "sum") return F::Reduction::Sum;
  if (r == "none") return F::Reduction::None;
  throw py::value_error("reduction must be 'mean', 'sum' or 'none', got '" + r + "'");
}

Tensor or_undefined(const std::optional<Tensor>& t) { return t.value_or(Tensor()); }

TensorOptions layer_options(py::handle dtype, py::handle device) {
  return TensorOptions().dtype(to_dtype(dtype, DType::F32)).device(to_device(device));
}

py::dict to_dict(const nn::StateDict& state) {
  py::dict d;
  for (const auto& [name, t] : state) d[py::str(name)] = t;
  return d;
}

nn::StateDict from_dict(const py::dict& d) {
  nn::StateDict state;
  for (auto [k, v] : d) {
    const std::string key = py::str(k);
    state.insert(key, to_tensor(v, fmt::format("state_dict['{}']", key).c_str()));
  }
  return state;
}

/// PyTorch's params argument: tensors, or dicts of groups with "params" and optionally "lr" and "weight_decay".
std::vector<optim::ParamGroup> to_groups(py::iterable params) {
  std::vector<optim::ParamGroup> groups;
  std::vector<Tensor> loose;
  // Iterating a tensor would give its rows, views that no optimizer can update: PyTorch refuses it too.
  if (py::isinstance<Tensor>(params)) {
    throw TypeError("params must be an iterable of tensors or of dicts (parameter groups), not a Tensor; pass "
                    "[tensor] or model.parameters()");
  }
  for (py::handle p : params) {
    if (!py::isinstance<py::dict>(p)) {
      loose.push_back(to_tensor(p, "params: each element"));
      continue;
    }
    optim::ParamGroup group;
    for (auto [key, value] : p.cast<py::dict>()) {
      const std::string name = key.cast<std::string>();
      if (name == "params") {
        if (py::isinstance<Tensor>(value)) {
          group.params.push_back(value.cast<Tensor>());
        } else {
          for (py::handle t : value.cast<py::iterable>()) group.params.push_back(t.cast<Tensor>());
        }
      } else if (name == "lr") {
        group.lr = value.cast<double>();
      } else if (name == "weight_decay") {
        group.weight_decay = value.cast<double>();
      } else {
        throw py::value_error("parameter group option '" + name +
                              "' is not supported: a group may set only 'lr' and 'weight_decay'");
      }
    }
    groups.push_back(std::move(group));
  }
  if (!loose.empty() && !groups.empty()) {
    throw py::type_error("params mixes tensors and parameter groups (dicts); pass one kind");
  }
  if (groups.empty()) groups.push_back(optim::ParamGroup{std::move(loose)});
  return groups;
}

void register_layers(py::module_& nn_) {
  using Module = nn::Module;
  py::class_<Module, std::shared_ptr<Module>>(nn_, "CppModule", "A module implemented in C++.")
      .def("named_parameters", &Module::named_parameters, py::arg("recurse") = true)
      .def("named_buffers", &Module::named_buffers, py::arg("recurse") = true)
      .def("train", &Module::train, py::arg("mode") = true)
      .def("replace_parameter", &Module::replace_parameter, py::arg("name"), py::arg("value"))
      .def_property_readonly("training", &Module::is_training)
      .def_property_readonly("type_name", &Module::type_name);
  py::class_<nn::Layer, Module, std::shared_ptr<nn::Layer>>(nn_, "CppLayer")
      .def("__call__", [](nn::Layer& l, const Tensor& x) { return without_gil([&] { return l(x); }); });
  using namespace nn;
  py::class_<Linear, Layer, std::shared_ptr<Linear>>(nn_, "Linear")
      .def(py::init([](int64_t in, int64_t out, bool bias, py::object dtype, py::object device) {
             return std::make_shared<Linear>(in, out, bias, layer_options(dtype, device));
           }),
           py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true, py::arg("dtype") = py::none(),
           py::arg("device") = py::none());
  py::class_<Conv2d, Layer, std::shared_ptr<Conv2d>>(nn_, "Conv2d")
      .def(py::init([](int64_t in, int64_t out, py::object kernel, py::object stride, py::object padding,
                       py::object dilation, int64_t groups, bool bias, py::object dtype, py::object device) {
             Conv2dOptions o(in, out, to_pair(kernel));
             o.stride(to_pair(stride)).padding(to_pair(padding)).dilation(to_pair(dilation)).groups(groups).bias(bias);
             o.tensor_options_ = layer_options(dtype, device);
             return std::make_shared<Conv2d>(o);
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true,
           py::arg("dtype") = py::none(), py::arg("device") = py::none());
  // For Python's fused Sequential, which hands its runs of C++ layers to run_layers (Note [Fusing a Sequential's
  // layers]): the ReLU it matches there, and the function itself.
  py::class_<ReLU, Layer, std::shared_ptr<ReLU>>(nn_, "ReLU").def(py::init<>());
  nn_.def(
      "run_layers",
      [](const std::vector<std::shared_ptr<Layer>>& layers, const Tensor& x, bool fuse) {
        return without_gil([&] { return run_layers(layers, x, fuse); });
      },
      py::arg("layers"), py::arg("input"), py::arg("fuse") = true,
      "the layers applied in order to input, as C++'s Sequential runs them (fused when fuse)");
  auto pool = [](py::object kernel, py::object stride, py::object padding) {
    Pool2dOptions o(to_pair(kernel));
    if (!stride.is_none()) o.stride(to_pair(stride));
    o.padding(to_pair(padding));
    return o;
  };
  py::class_<MaxPool2d, Layer, std::shared_ptr<MaxPool2d>>(nn_, "MaxPool2d")
      .def(py::init(
               [pool](py::object k, py::object s, py::object p) { return std::make_shared<MaxPool2d>(pool(k, s, p)); }),
           py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0);
  py::class_<AvgPool2d, Layer, std::shared_ptr<AvgPool2d>>(nn_, "AvgPool2d")
      .def(py::init(
               [pool](py::object k, py::object s, py::object p) { return std::make_shared<AvgPool2d>(pool(k, s, p)); }),
           py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0);
  py::class_<AdaptiveAvgPool2d, Layer, std::shared_ptr<AdaptiveAvgPool2d>>(nn_, "AdaptiveAvgPool2d")
      .def(py::init([](py::object size) { return std::make_shared<AdaptiveAvgPool2d>(to_pair(size)); }),
           py::arg("output_size"));
  py::class_<BatchNorm2d, Layer, std::shared_ptr<BatchNorm2d>>(nn_, "BatchNorm2d")
      .def(py::init([](int64_t n, double eps, double momentum, bool affine, bool track, py::object dtype,
                       py::object device) {
             BatchNorm2dOptions o(n);
             o.eps(eps).momentum(momentum).affine(affine).track_running_stats(track);
             o.tensor_options_ = layer_options(dtype, device);
             return std::make_shared<BatchNorm2d>(o);
           }),
           py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::arg("affine") = true,
           py::arg("track_running_stats") = true, py::arg("dtype") = py::none(), py::arg("device") = py::none());
  py::class_<LayerNorm, Layer, std::shared_ptr<LayerNorm>>(nn_, "LayerNorm")
      .def(py::init([](py::object shape, double eps, bool affine, py::object dtype, py::object device) {
             LayerNormOptions o(to_sizes(shape, "LayerNorm(): normalized_shape"));
             o.eps(eps).elementwise_affine(affine);
             o.tensor_options_ = layer_options(dtype, device);
             return std::make_shared<LayerNorm>(o);
           }),
           py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true,
           py::arg("dtype") = py::none(), py::arg("device") = py::none());
  py::class_<Dropout, Layer, std::shared_ptr<Dropout>>(nn_, "Dropout").def(py::init<double>(), py::arg("p") = 0.5);
  py::class_<Embedding, Layer, std::shared_ptr<Embedding>>(nn_, "Embedding")
      .def(py::init([](int64_t n, int64_t dim, py::object dtype, py::object device) {
             return std::make_shared<Embedding>(n, dim, layer_options(dtype, device));
           }),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::arg("dtype") = py::none(),
           py::arg("device") = py::none());
  nn_.def(
      "to_in_place",
      [](const std::vector<Tensor>& tensors, std::optional<Device> device, std::optional<DType> dtype) {
        // What Module::to does to each tensor (Python's Module holds its tensors itself), all in one replacement so
        // that a forward on another thread sees the module wholly converted or not at all.
        NoGradGuard no_grad;
        auto convert = [&](const Tensor& x) {
          Tensor y = device ? x.to(*device) : x;
          return dtype && is_floating(y.dtype()) ? y.to(*dtype) : y;
        };
        replacing_data("Module.to", [&] {
          for (const Tensor& t : tensors) nn::convert_in_place(t, convert);
        });
      },
      py::arg("tensors"), py::arg("device") = py::none(), py::arg("dtype") = py::none());
}

void register_functional(py::module_& f) {
  f.def(
      "linear",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> b) {
        return without_gil([&] { return F::linear(x, w, or_undefined(b)); });
      },
      py::arg("input"), py::arg("weight"), py::arg("bias") = py::none());
  f.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> b, py::object stride, py::object padding,
         py::object dilation, int64_t groups) {
        const F::Pair s = to_pair(stride), p = to_pair(padding), d = to_pair(dilation);
        return without_gil([&] { return F::conv2d(x, w, or_undefined(b), s, p, d, groups); });
      },
      py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1, py::arg("padding") = 0,
      py::arg("dilation") = 1, py::arg("groups") = 1);
  f.def(
      "max_pool2d",
      [](const Tensor& x, py::object kernel, py::object stride, py::object padding) {
        const F::Pair k = to_pair(kernel), p = to_pair(padding);
        const auto s = to_optional_pair(stride);
        return without_gil([&] { return F::max_pool2d(x, k, s, p); });
      },
      py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0);
  f.def(
      "avg_pool2d",
      [](const Tensor& x, py::object kernel, py::object stride, py::object padding) {
        const F::Pair k = to_pair(kernel), p = to_pair(padding);
        const auto s = to_optional_pair(stride);
        return without_gil([&] { return F::avg_pool2d(x, k, s, p); });
      },
      py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0);
  f.def(
      "adaptive_avg_pool2d",
      [](const Tensor& x, py::object size) {
        const F::Pair s = to_pair(size);
        return without_gil([&] { return F::adaptive_avg_pool2d(x, s); });
      },
      py::arg("input"), py::arg("output_size"));
  f.def(
      "dropout", [](const Tensor& x, double p, bool training) { return F::dropout(x, p, training); }, py::arg("input"),
      py::arg("p") = 0.5, py::arg("training") = true);
  f.def(
      "batch_norm",
      [](const Tensor& x, std::optional<Tensor> mean, std::optional<Tensor> var, std::optional<Tensor> w,
         std::optional<Tensor> b, bool training, double momentum, double eps) {
        return without_gil([&] {
          return F::batch_norm(x, or_undefined(mean), or_undefined(var), or_undefined(w), or_undefined(b), training,
                               momentum, eps);
        });
      },
      py::arg("input"), py::arg("running_mean"), py::arg("running_var"), py::arg("weight") = py::none(),
      py::arg("bias") = py::none(), py::arg("training") = false, py::arg("momentum") = 0.1, py::arg("eps") = 1e-5);
  f.def(
      "layer_norm",
      [](const Tensor& x, py::object shape, std::optional<Tensor> w, std::optional<Tensor> b, double eps) {
        const Shape s = to_shape(shape);
        return without_gil([&] { return F::layer_norm(x, s, or_undefined(w), or_undefined(b), eps); });
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
      py::arg("eps") = 1e-5);
  f.def(
      "embedding", [](const Tensor& i, const Tensor& w) { return F::embedding(i, w); }, py::arg("input"),
      py::arg("weight"));
  // The fused attention, and the composed formula it is tested against (strata.nn.functional's wrapper).
  for (const auto& [name, impl] : {std::pair{"scaled_dot_product_attention", F::AttentionImpl::kFused},
                                   std::pair{"_scaled_dot_product_attention_composed", F::AttentionImpl::kComposed}}) {
    const F::AttentionImpl which = impl;
    f.def(
        name,
        [which](const Tensor& q, const Tensor& k, const Tensor& v, std::optional<Tensor> mask, double p, bool causal,
                std::optional<double> scale) {
          return without_gil(
              [&] { return F::scaled_dot_product_attention(q, k, v, or_undefined(mask), p, causal, scale, which); });
        },
        py::arg("query"), py::arg("key"), py::arg("value"), py::arg("attn_mask") = py::none(),
        py::arg("dropout_p") = 0.0, py::arg("is_causal") = false, py::arg("scale") = py::none());
  }
  f.def(
      "cross_entropy",
      [](const Tensor& x, const Tensor& target, const std::string& reduction, double smoothing, int64_t ignore) {
        const F::Reduction r = to_reduction(reduction);
        return without_gil([&] { return F::cross_entropy(x, target, r, smoothing, ignore); });
      },
      py::arg("input"), py::arg("target"), py::arg("reduction") = "mean", py::arg("label_smoothing") = 0.0,
      py::arg("ignore_index") = F::kIgnoreIndex);
  f.def(
      "nll_loss",
      [](const Tensor& x, const Tensor& target, const std::string& reduction, int64_t ignore) {
        const F::Reduction r = to_reduction(reduction);
        return without_gil([&] { return F::nll_loss(x, target, r, ignore); });
      },
      py::arg("input"), py::arg("target"), py::arg("reduction") = "mean", py::arg("ignore_index") = F::kIgnoreIndex);
  f.def(
      "mse_loss",
      [](const Tensor& x, const Tensor& target, const std::string& reduction) {
        const F::Reduction r = to_reduction(reduction);
        return without_gil([&] { return F::mse_loss(x, target, r); });
      },
      py::arg("input"), py::arg("target"), py::arg("reduction") = "mean");
}

nn::init::FanMode to_fan_mode(const std::string& mode) {
  if (mode == "fan_in") return nn::init::FanMode::FanIn;
  if (mode == "fan_out") return nn::init::FanMode::FanOut;
  throw py::value_error("mode must be 'fan_in' or 'fan_out', got '" + mode + "'");
}

nn::init::Nonlinearity to_nonlinearity(const std::string& name) {
  using N = nn::init::Nonlinearity;
  static const std::pair<const char*, N> names[] = {{"linear", N::Linear},
                                                    {"conv1d", N::Conv},
                                                    {"conv2d", N::Conv},
                                                    {"conv3d", N::Conv},
                                                    {"sigmoid", N::Sigmoid},
                                                    {"tanh", N::Tanh},
                                                    {"relu", N::ReLU},
                                                    {"leaky_relu", N::LeakyReLU},
                                                    {"selu", N::SELU},
                                                    {"conv_transpose1d", N::Conv},
                                                    {"conv_transpose2d", N::Conv}};
  for (const auto& [n, v] : names) {
    if (name == n) return v;
  }
  throw py::value_error("unsupported nonlinearity '" + name +
                        "': one of linear, conv1d, conv2d, conv3d, sigmoid, tanh, relu, leaky_relu, selu");
}

/// torch.nn.init, over strata/nn/init.h; strata.nn.init adds PyTorch's argument checks and trunc_normal_.
void register_init(py::module_& i) {
  namespace init = nn::init;
  i.def("uniform_", &init::uniform_, py::arg("tensor"), py::arg("a") = 0.0, py::arg("b") = 1.0);
  i.def("normal_", &init::normal_, py::arg("tensor"), py::arg("mean") = 0.0, py::arg("std") = 1.0);
  i.def("constant_", &init::constant_, py::arg("tensor"), py::arg("val"));
  i.def("zeros_", &init::zeros_, py::arg("tensor"));
  i.def("ones_", &init::ones_, py::arg("tensor"));
  i.def("xavier_uniform_", &init::xavier_uniform_, py::arg("tensor"), py::arg("gain") = 1.0);
  i.def("xavier_normal_", &init::xavier_normal_, py::arg("tensor"), py::arg("gain") = 1.0);
  i.def(
      "kaiming_uniform_",
      [](Tensor t, double a, const std::string& mode, const std::string& nonlinearity) {
        return init::kaiming_uniform_(t, a, to_fan_mode(mode), to_nonlinearity(nonlinearity));
      },
      py::arg("tensor"), py::arg("a") = 0.0, py::arg("mode") = "fan_in", py::arg("nonlinearity") = "leaky_relu");
  i.def(
      "kaiming_normal_",
      [](Tensor t, double a, const std::string& mode, const std::string& nonlinearity) {
        return init::kaiming_normal_(t, a, to_fan_mode(mode), to_nonlinearity(nonlinearity));
      },
      py::arg("tensor"), py::arg("a") = 0.0, py::arg("mode") = "fan_in", py::arg("nonlinearity") = "leaky_relu");
  i.def(
      "calculate_gain",
      [](const std::string& nonlinearity, std::optional<double> param) {
        return init::calculate_gain(to_nonlinearity(nonlinearity), param.value_or(0.01));
      },
      py::arg("nonlinearity"), py::arg("param") = py::none());
  i.def("_calculate_fan_in_and_fan_out", &init::calculate_fan_in_and_fan_out, py::arg("tensor"));
}

/// torch.nn.utils's gradient clipping.
void register_utils(py::module_& u) {
  u.def(
      "clip_grad_norm_",
      [](py::iterable params, double max_norm, double norm_type) {
        std::vector<Tensor> ps;
        for (py::handle p : params) ps.push_back(to_tensor(p, "parameters: each element"));
        return without_gil([&] { return nn::utils::clip_grad_norm_(ps, max_norm, norm_type); });
      },
      py::arg("parameters"), py::arg("max_norm"), py::arg("norm_type") = 2.0);
  u.def(
      "clip_grad_value_",
      [](py::iterable params, double clip_value) {
        std::vector<Tensor> ps;
        for (py::handle p : params) ps.push_back(to_tensor(p, "parameters: each element"));
        without_gil([&] { nn::utils::clip_grad_value_(ps, clip_value); });
      },
      py::arg("parameters"), py::arg("clip_value"));
}

/// An optimizer written in Python (strata.optim's RMSprop, Adagrad): the C++ base keeps its parameter groups and
/// per-parameter state, so zero_grad, param_groups, add_param_group, state_dict and the C++ schedulers work on it
/// as on SGD; the subclass's step() does the update.
class PythonOptimizer : public optim::Optimizer {
 public:
  PythonOptimizer(std::string name, std::vector<optim::ParamGroup> groups, double lr,
                  std::vector<std::string> state_names, bool counts_steps)
      : Optimizer(std::move(name), std::move(groups), lr),
        state_names_(std::move(state_names)),
        counts_steps_(counts_steps) {}
  void step() override { PYBIND11_OVERRIDE_PURE(void, Optimizer, step, ); }
  std::vector<std::string> state_names() const override { return state_names_; }
  bool counts_steps() const override { return counts_steps_; }
  using Optimizer::state_for;

 private:
  std::vector<std::string> state_names_;
  bool counts_steps_;
};

void register_python_optimizer(py::module_& o) {
  py::class_<PythonOptimizer, optim::Optimizer, std::shared_ptr<PythonOptimizer>>(
      o, "PythonOptimizer", "Base of the optimizers written in Python; subclasses define step().")
      .def(py::init([](py::iterable params, double lr, std::string name, std::vector<std::string> state_names,
                       bool counts_steps) {
             return std::make_shared<PythonOptimizer>(std::move(name), to_groups(params), lr, std::move(state_names),
                                                      counts_steps);
           }),
           py::arg("params"), py::arg("lr"), py::arg("name"), py::arg("state_names"), py::arg("counts_steps"))
      .def(
          "_state",
          [](PythonOptimizer& opt, std::size_t i) {
            STRATA_CHECK(i < opt.params().size(), IndexError, "{}: no parameter {}", opt.name(), i);
            optim::ParamState& s = opt.state_for(i);
            py::dict tensors;
            for (const auto& [name, t] : s.tensors) tensors[py::str(name)] = t;
            return py::make_tuple(tensors, s.step);
          },
          py::arg("index"), "(tensors by name, step count) of parameter `index`, on its device.")
      .def(
          "_set_state",
          [](PythonOptimizer& opt, std::size_t i, const std::string& name, const Tensor& t) {
            STRATA_CHECK(i < opt.params().size(), IndexError, "{}: no parameter {}", opt.name(), i);
            opt.state_for(i).tensors[name] = t;
          },
          py::arg("index"), py::arg("name"), py::arg("tensor"))
      .def(
          "_set_step",
          [](PythonOptimizer& opt, std::size_t i, int64_t step) {
            STRATA_CHECK(i < opt.params().size(), IndexError, "{}: no parameter {}", opt.name(), i);
            opt.state_for(i).step = step;
          },
          py::arg("index"), py::arg("step"));
}

void register_optim(py::module_& o) {
  using namespace optim;
  py::class_<Optimizer, std::shared_ptr<Optimizer>>(o, "Optimizer")
      .def(
          "step",
          [](Optimizer& opt, py::object closure) -> py::object {
            py::object loss = closure.is_none() ? py::none() : closure();
            without_gil([&] { opt.step(); });
            return loss;
          },
          py::arg("closure") = py::none())
      .def(
          "zero_grad", [](Optimizer& opt, bool set_to_none) { opt.zero_grad(set_to_none); },
          py::arg("set_to_none") = true)
      .def_property("lr", &Optimizer::lr, &Optimizer::set_lr)
      .def_property_readonly("params", &Optimizer::params)
      // The pieces of param_groups, which strata.optim assembles into PyTorch's list of dicts.
      .def("_group_count", [](const Optimizer& opt) { return opt.groups().size(); })
      .def("_group_params",
           [](const Optimizer& opt, std::size_t g) {
             const Optimizer::Group& group = opt.groups().at(g);
             return std::vector<Tensor>(opt.params().begin() + static_cast<std::ptrdiff_t>(group.begin),
                                        opt.params().begin() + static_cast<std::ptrdiff_t>(group.end));
           })
      .def("_group_lr", [](const Optimizer& opt, std::size_t g) { return opt.groups().at(g).lr; })
      .def("_set_group_lr", &Optimizer::set_group_lr)
      .def("_group_weight_decay", [](const Optimizer& opt, std::size_t g) { return opt.groups().at(g).weight_decay; })
      .def("_set_group_weight_decay", &Optimizer::set_group_weight_decay)
      .def(
          "add_param_group",
          [](Optimizer& opt, const py::dict& group) {
            opt.add_param_group(std::move(to_groups(py::make_tuple(group)).front()));
          },
          py::arg("param_group"))
      .def("state_dict", [](const Optimizer& opt) { return to_dict(opt.state_dict()); })
      .def(
          "load_state_dict", [](Optimizer& opt, const py::dict& d) { opt.load_state_dict(from_dict(d)); },
          py::arg("state_dict"))
      .def("__repr__", [](const Optimizer& opt) { return opt.name() + "(lr=" + std::to_string(opt.lr()) + ")"; });
  py::class_<SGD, Optimizer, std::shared_ptr<SGD>>(o, "SGD").def(
      py::init([](py::iterable params, double lr, double momentum, double dampening, double wd, bool nesterov) {
        SGDOptions opts(lr);
        opts.momentum(momentum).dampening(dampening).weight_decay(wd).nesterov(nesterov);
        return std::make_shared<SGD>(to_groups(params), opts);
      }),
      py::arg("params"), py::arg("lr"), py::arg("momentum") = 0.0, py::arg("dampening") = 0.0,
      py::arg("weight_decay") = 0.0, py::arg("nesterov") = false);
  auto adam_options = [](double lr, std::pair<double, double> betas, double eps, std::optional<double> wd) {
    AdamOptions opts(lr);
    opts.betas(betas.first, betas.second).eps(eps);
    if (wd) opts.weight_decay(*wd);
    return opts;
  };
  py::class_<Adam, Optimizer, std::shared_ptr<Adam>>(o, "Adam").def(
      py::init([adam_options](py::iterable params, double lr, std::pair<double, double> betas, double eps,
                              std::optional<double> wd) {
        return std::make_shared<Adam>(to_groups(params), adam_options(lr, betas, eps, wd));
      }),
      py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999), py::arg("eps") = 1e-8,
      py::arg("weight_decay") = py::none());
  py::class_<AdamW, Adam, std::shared_ptr<AdamW>>(o, "AdamW")
      .def(py::init([adam_options](py::iterable params, double lr, std::pair<double, double> betas, double eps,
                                   std::optional<double> wd) {
             return std::make_shared<AdamW>(to_groups(params), adam_options(lr, betas, eps, wd));
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999),
           py::arg("eps") = 1e-8, py::arg("weight_decay") = py::none());
  register_python_optimizer(o);

  py::module_ s = o.def_submodule("lr_scheduler");
  py::class_<LRScheduler, std::shared_ptr<LRScheduler>>(s, "LRScheduler")
      .def("step", &LRScheduler::step)
      .def("get_last_lr", &LRScheduler::last_lrs)
      .def_property_readonly("last_epoch", &LRScheduler::last_epoch)
      .def_property_readonly("base_lrs", &LRScheduler::base_lrs)
      .def("state_dict", [](const LRScheduler& sch) { return to_dict(sch.state_dict()); })
      .def(
          "load_state_dict", [](LRScheduler& sch, const py::dict& d) { sch.load_state_dict(from_dict(d)); },
          py::arg("state_dict"));
  // The scheduler holds a reference to the optimizer: keep_alive keeps the optimizer as long as the scheduler.
  py::class_<StepLR, LRScheduler, std::shared_ptr<StepLR>>(s, "StepLR")
      .def(py::init<Optimizer&, int64_t, double>(), py::arg("optimizer"), py::arg("step_size"), py::arg("gamma") = 0.1,
           py::keep_alive<1, 2>());
  py::class_<CosineAnnealingLR, LRScheduler, std::shared_ptr<CosineAnnealingLR>>(s, "CosineAnnealingLR")
      .def(py::init<Optimizer&, int64_t, double>(), py::arg("optimizer"), py::arg("T_max"), py::arg("eta_min") = 0.0,
           py::keep_alive<1, 2>());
}

}  // namespace

void register_nn(py::module_& m) {
  py::module_ nn_ = m.def_submodule("nn", "C++ layers; use strata.nn, which wraps them in Python modules.");
  register_layers(nn_);
  py::module_ functional = nn_.def_submodule("functional");
  register_functional(functional);
  py::module_ init = nn_.def_submodule("init");
  register_init(init);
  py::module_ utils = nn_.def_submodule("utils");
  register_utils(utils);
  py::module_ optim = m.def_submodule("optim");
  register_optim(optim);
}

}  // namespace strata::python
