#include "conv_floor.h"

#if STRATA_BENCH_HAVE_DNNL
#include <algorithm>
#include <chrono>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <unordered_map>
#include <vector>
#endif

#include "strata/core/error.h"
#include "strata/runtime/parallel.h"

namespace strata::bench {

#if STRATA_BENCH_HAVE_DNNL

// Note [The convolution floor]
// The target for the CPU's convolutions is the library's own floor: Strata's forward + backward of a layer at
// most 1.05x the time of the oneDNN primitives it runs on, called directly in the same process. The floor here is
// what no framework on oneDNN could beat with these primitives: every pass (forward, backward-data, backward-weights)
// takes the memory layouts oneDNN asks for (format `any`), so nothing is reordered; its inputs and outputs and its
// scratchpad are made once, outside the timed calls; and of the direct and Winograd algorithms the faster one counts
// for each pass, measured once when the floor is made (where oneDNN has a Winograd kernel: AVX-512 only in oneDNN 2.6).
// The threads are Strata's, taken as conv.cpp takes them (threads_for_work before each pass), so that both sides run
// on the same count. What
// the floor leaves out is what Strata must pay for being a tensor library: outputs allocated per call, autograd,
// reorders where a tensor's layout is not the pass's, and the CPU paths of Strata's own (Note [Weight gradients of
// thin convolutions] in conv.cpp, which beats the floor's backward-weights on a first layer).

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

// One primitive with every argument it takes allocated in its own layout, filled with small values (no denormals).
struct Pass {
  dnnl::primitive primitive;
  std::unordered_map<int, dnnl::memory> args;
  std::string impl;
  bool depends_on_threads = false;  // conv.cpp's choice of threads: all of them, or the budget

  template <typename Primitive>
  static Pass make(const typename Primitive::primitive_desc& pd, std::initializer_list<int> ids) {
    Pass pass{Primitive(pd), {}, pd.impl_info_str()};
    for (int id : ids) {
      const dnnl::memory::desc md = pd.query_md(dnnl::query::exec_arg_md, id);
      if (md.get_size() == 0) continue;
      dnnl::memory m(md, engine());
      float* p = static_cast<float*>(m.get_data_handle());
      std::fill(p, p + md.get_size() / sizeof(float), 0.01f);
      pass.args.emplace(id, m);
    }
    return pass;
  }

  void run() {
    (void)threads_for_work(depends_on_threads);
    primitive.execute(stream(), args);
    stream().wait();
  }
};

double seconds_of(Pass& pass) {
  pass.run();
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    pass.run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

class Floor final : public OneDnnConvFloor {
 public:
  explicit Floor(const ConvFloorShape& s) : s_(s) {
    (void)threads_for_work(true);
    for (const auto algorithm : {dnnl::algorithm::convolution_direct, dnnl::algorithm::convolution_winograd}) {
      const bool winograd = algorithm == dnnl::algorithm::convolution_winograd;
      keep_faster(forward_, make_forward(algorithm), winograd);
      if (s.backward_data) keep_faster(backward_data_, make_backward_data(algorithm), winograd);
      keep_faster(backward_weights_, make_backward_weights(algorithm), true);
    }
    STRATA_CHECK(forward_ && backward_weights_ && (backward_data_ || !s.backward_data), BackendError,
                 "conv floor: oneDNN made no convolution for [{}, {}, {}, {}] x [{}, {}, 3, 3]", s.n, s.c, s.h, s.w,
                 s.o, s.c);
  }

  void forward() override { forward_->run(); }

  void forward_backward() override {
    forward_->run();
    if (backward_data_) backward_data_->run();
    backward_weights_->run();
  }

  std::string describe() const override {
    std::string d = "fwd " + forward_->impl;
    if (backward_data_) d += ", bwd_d " + backward_data_->impl;
    return d + ", bwd_w " + backward_weights_->impl;
  }

 private:
  dnnl::memory::desc md(const dnnl::memory::dims& dims) const { return {dims, dt::f32, tag::any}; }
  dnnl::memory::desc src() const { return md({s_.n, s_.c, s_.h, s_.w}); }
  dnnl::memory::desc weights() const { return md({s_.o, s_.c, 3, 3}); }
  dnnl::memory::desc bias() const { return {{s_.o}, dt::f32, tag::x}; }
  dnnl::memory::desc dst() const { return md({s_.n, s_.o, s_.h, s_.w}); }

  static dnnl::primitive_attr attr() {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // one scratchpad, made once, as Pass::make makes it
    return a;
  }

  dnnl::convolution_forward::primitive_desc forward_pd(dnnl::algorithm algorithm) const {
    return {
        {dnnl::prop_kind::forward_training, algorithm, src(), weights(), bias(), dst(), {1, 1}, {0, 0}, {1, 1}, {1, 1}},
        attr(),
        engine()};
  }

  // The pass make() builds, or nothing where oneDNN has no kernel for that algorithm (Winograd without AVX-512).
  template <typename Make>
  static std::optional<Pass> unless_unimplemented(Make make) {
    try {
      return make();
    } catch (const dnnl::error& e) {
      if (e.status != dnnl_unimplemented) throw;
      return std::nullopt;
    }
  }

  std::optional<Pass> make_forward(dnnl::algorithm algorithm) const {
    return unless_unimplemented([&] {
      return Pass::make<dnnl::convolution_forward>(
          forward_pd(algorithm), {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD});
    });
  }

  std::optional<Pass> make_backward_data(dnnl::algorithm algorithm) const {
    return unless_unimplemented([&] {
      const dnnl::convolution_backward_data::primitive_desc pd(
          {algorithm, src(), weights(), dst(), {1, 1}, {0, 0}, {1, 1}, {1, 1}}, attr(), engine(),
          forward_pd(algorithm));
      return Pass::make<dnnl::convolution_backward_data>(
          pd, {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC, DNNL_ARG_SCRATCHPAD});
    });
  }

  std::optional<Pass> make_backward_weights(dnnl::algorithm algorithm) const {
    return unless_unimplemented([&] {
      const dnnl::convolution_backward_weights::primitive_desc pd(
          {algorithm, src(), weights(), bias(), dst(), {1, 1}, {0, 0}, {1, 1}, {1, 1}}, attr(), engine(),
          forward_pd(algorithm));
      return Pass::make<dnnl::convolution_backward_weights>(
          pd, {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS, DNNL_ARG_SCRATCHPAD});
    });
  }

  // A pass runs on the threads conv.cpp gives it: every thread for a weight gradient (a sum over the batch split
  // over them) and for Winograd, the budget (Note [Fewer threads while other processes hold the cores]) otherwise.
  static void keep_faster(std::optional<Pass>& kept, std::optional<Pass> candidate, bool depends_on_threads) {
    if (!candidate) return;
    candidate->depends_on_threads = depends_on_threads;
    if (!kept || seconds_of(*candidate) < seconds_of(*kept)) kept = std::move(candidate);
  }

  ConvFloorShape s_;
  std::optional<Pass> forward_, backward_data_, backward_weights_;
};

}  // namespace

std::unique_ptr<OneDnnConvFloor> OneDnnConvFloor::make(const ConvFloorShape& shape) {
  return std::make_unique<Floor>(shape);
}

#else

std::unique_ptr<OneDnnConvFloor> OneDnnConvFloor::make(const ConvFloorShape&) { return nullptr; }

#endif

}  // namespace strata::bench
