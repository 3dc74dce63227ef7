// strata._C's profiler functions: start/stop of strata::profiler (strata/runtime/profiler.h) and its result. The
// interface users meet is Python's, strata.profiler.profile(), shaped as torch.profiler.profile.
#include "strata/runtime/profiler.h"

#include <memory>
#include <string>

#include "bindings.h"

namespace strata::python {

namespace {

const char* kind_name(profiler::EventKind kind) {
  switch (kind) {
    case profiler::EventKind::Op: return "op";
    case profiler::EventKind::Range: return "range";
    case profiler::EventKind::Copy: return "copy";
    case profiler::EventKind::Synchronization: return "sync";
    case profiler::EventKind::Allocator: return "allocator";
  }
  return "op";
}

}  // namespace

void register_profiler(py::module_& m) {
  py::class_<profiler::Result, std::shared_ptr<profiler::Result>>(m, "_ProfilerResult",
                                                                  "A finished recording; see strata.profiler.")
      .def("table", &profiler::Result::table, py::arg("sort_by") = "cpu_time_total", py::arg("row_limit") = 10)
      .def("chrome_trace", &profiler::Result::chrome_trace)
      .def("export_chrome_trace", &profiler::Result::export_chrome_trace, py::arg("path"))
      .def("key_averages",
           [](const profiler::Result& r) {
             py::list out;
             for (const profiler::OpAverage& a : r.key_averages()) {
               py::dict d;
               d["key"] = a.name;
               d["count"] = a.calls;
               d["cpu_time_total_ns"] = a.cpu_total_ns;
               d["self_cpu_time_total_ns"] = a.self_cpu_ns;
               d["device_time_total_ns"] = a.device_total_ns;
               d["device_count"] = a.device_calls;
               out.append(std::move(d));
             }
             return out;
           })
      .def("events", [](const profiler::Result& r) {
        py::list out;
        for (const profiler::Event& e : r.events()) {
          py::dict d;
          d["kind"] = kind_name(e.kind);
          d["name"] = e.name;
          d["device"] = e.device.str();
          d["stream"] = e.stream;
          d["thread"] = e.thread;
          d["start_ns"] = e.start_ns;
          d["duration_ns"] = e.duration_ns;
          d["shapes"] = e.shapes;
          d["bytes"] = e.bytes;
          d["detail"] = e.detail;
          d["device_ns"] = e.device_ns;
          out.append(std::move(d));
        }
        return out;
      });
  m.def("_profiler_start", &profiler::start);
  m.def("_profiler_stop", [] { return std::make_shared<profiler::Result>(profiler::stop()); });
  m.def("_profiler_enabled", &profiler::is_enabled);
  m.def("_profiler_check_writable", &profiler::check_writable, py::arg("path"));
  py::class_<profiler::RecordFunction>(m, "_RecordFunction").def(py::init<std::string>(), py::arg("name"));
}

}  // namespace strata::python
