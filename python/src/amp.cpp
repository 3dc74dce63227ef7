// Mixed precision: autocast's per-thread setting and GradScaler (strata.amp).

#include "bindings.h"
#include "strata/optim/grad_scaler.h"
#include "strata/tensor/autocast.h"

namespace strata::python {

namespace {

/// The device type of "cpu", "cuda", "hip:1", ...: Device's parser, whose error names the text.
DeviceType to_device_type(const std::string& text) { return Device(text).type(); }

}  // namespace

void register_amp(py::module_& m) {
  py::module_ amp = m.def_submodule("amp", "Mixed precision: autocast's setting and GradScaler");
  amp.def(
      "_get_autocast",
      [](const std::string& type) {
        const amp::AutocastState s = amp::autocast_state(to_device_type(type));
        return py::make_tuple(s.enabled, s.dtype);
      },
      py::arg("device_type"), "This thread's (enabled, dtype) for a device type.");
  amp.def(
      "_set_autocast",
      [](const std::string& type, bool enabled, DType dtype) {
        amp::set_autocast_state(to_device_type(type), {enabled, dtype});
      },
      py::arg("device_type"), py::arg("enabled"), py::arg("dtype"));
  amp.def(
      "_default_dtype", [](const std::string& type) { return amp::default_autocast_dtype(to_device_type(type)); },
      py::arg("device_type"));

  py::class_<amp::GradScaler>(amp, "GradScaler", "Dynamic loss scaling for f16 training (torch.amp.GradScaler).")
      // `device` is checked and otherwise unused: the scaling is the same on every device (PyTorch keeps its scale
      // on that device, and disables the scaler when CUDA is missing; Strata's works wherever the gradients are).
      .def(py::init([](const std::string& device, double init_scale, double growth_factor, double backoff_factor,
                       int64_t growth_interval, bool enabled) {
             to_device_type(device);
             amp::GradScalerOptions o;
             o.init_scale = init_scale;
             o.growth_factor = growth_factor;
             o.backoff_factor = backoff_factor;
             o.growth_interval = growth_interval;
             o.enabled = enabled;
             return amp::GradScaler(o);
           }),
           py::arg("device") = "cuda", py::arg("init_scale") = 65536.0, py::arg("growth_factor") = 2.0,
           py::arg("backoff_factor") = 0.5, py::arg("growth_interval") = 2000, py::arg("enabled") = true)
      .def("scale", &amp::GradScaler::scale, py::arg("outputs"))
      .def(
          "unscale_", [](amp::GradScaler& s, optim::Optimizer& o) { without_gil([&] { s.unscale_(o); }); },
          py::arg("optimizer"))
      .def(
          "step",
          [](amp::GradScaler& s, py::object optimizer, py::args args, py::kwargs kwargs) {
            auto& o = optimizer.cast<optim::Optimizer&>();
            bool go = false;
            without_gil([&] { go = s.begin_step(o); });
            // The optimizer's own step through Python, so that a Python optimizer's method (and a closure) runs.
            if (go) optimizer.attr("step")(*args, **kwargs);
            return go;
          },
          py::arg("optimizer"),
          "Unscales (unless unscale_ did) and steps unless a gradient holds an inf or a NaN; whether it stepped.")
      .def(
          "update",
          [](amp::GradScaler& s, py::object new_scale) {
            if (new_scale.is_none()) {
              s.update();
            } else {
              s.update(new_scale.cast<double>());
            }
          },
          py::arg("new_scale") = py::none())
      .def("get_scale", &amp::GradScaler::get_scale)
      .def("is_enabled", &amp::GradScaler::is_enabled)
      .def("get_growth_factor", [](const amp::GradScaler& s) { return s.options().growth_factor; })
      .def("get_backoff_factor", [](const amp::GradScaler& s) { return s.options().backoff_factor; })
      .def("get_growth_interval", [](const amp::GradScaler& s) { return s.options().growth_interval; })
      .def("_get_growth_tracker", &amp::GradScaler::growth_tracker)
      .def("state_dict",
           [](const amp::GradScaler& s) {
             py::dict d;
             for (const auto& [name, value] : s.state_dict()) {
               d[py::str(name)] = value.dtype() == DType::I64 ? py::object(py::int_(value.item<int64_t>()))
                                                              : py::object(py::float_(value.item<double>()));
             }
             return d;
           })
      .def(
          "load_state_dict",
          [](amp::GradScaler& s, const py::dict& d) {
            nn::StateDict state;
            for (const char* key : {"scale", "growth_factor", "backoff_factor"}) {
              if (d.contains(key)) state.insert(key, scalar_tensor(d[key].cast<double>(), TensorOptions(DType::F64)));
            }
            for (const char* key : {"growth_interval", "_growth_tracker"}) {
              if (d.contains(key)) state.insert(key, scalar_tensor(to_int(d[key], key), TensorOptions(DType::I64)));
            }
            s.load_state_dict(state);
          },
          py::arg("state_dict"));
}

}  // namespace strata::python
