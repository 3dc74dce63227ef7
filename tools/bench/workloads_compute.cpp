// Compute workloads of strata-bench: matrix product, the D2L synchronisation exercise, vector add, two devices,
// conv2d and Linear. Every GPU part runs only when CUDA is available and says why it did not otherwise.
#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <cstdint>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "conv_floor.h"
#include "strata/autograd/grad_mode.h"
#include "strata/nn/blocked.h"
#include "strata/nn/functional.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/parallel.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/stream.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "suite.h"

namespace strata::bench {

D2lRun d2l_run(Device device, bool read_each, int products) {
  const Tensor a = randn({100, 100}, device) * 0.1, b = randn({100, 100}, device) * 0.1;
  std::string printed;  // what would be printed; kept off the terminal so that the terminal's speed is not measured
  const int64_t syncs = transfer_counters().synchronizations;
  const double s = median_seconds(
      [&] {
        printed.clear();
        std::vector<Tensor> log;
        for (int i = 0; i < products; ++i) {
          const Tensor c = strata::matmul(a, b);
          if (read_each) {
            printed += fmt::format("{}\n", strata::norm(c).item<float>());
          } else {
            log.push_back(strata::norm(c));
          }
        }
        if (!read_each) {
          const Tensor norms = stack(log).to(kCPU);
          for (int64_t i = 0; i < norms.size(0); ++i) printed += fmt::format("{}\n", norms.data<float>()[i]);
        }
      },
      1, 1);
  // One warm-up and one timed run: the count per run is half of what both did.
  return {s, (transfer_counters().synchronizations - syncs) / 2};
}

namespace {

namespace F = nn::functional;
const Device kGpu(DeviceType::CUDA, 0);

std::string no_cuda_note() { return "GPU not measured: CUDA unavailable (" + cuda::unavailable_reason() + ")"; }

// Median seconds of one call of fn on the CPU: calls are batched so that one timed batch lasts ~`batch_s`.
double cpu_seconds_per_call(const std::function<void()>& fn, int repeats, double batch_s = 0.02) {
  fn();  // warm-up (and first-touch of any memory the call allocates)
  int batch = 1;
  const double once = median_seconds(fn, 1, 0);
  if (once < batch_s) batch = static_cast<int>(std::min(1e6, batch_s / std::max(once, 1e-9)));
  const double total = median_seconds(
      [&] {
        for (int i = 0; i < batch; ++i) fn();
      },
      repeats, 0);
  return total / batch;
}

// Median milliseconds of fn's device work, timed with events on `device`'s current stream, after one warm-up.
double gpu_ms_per_call(Device device, const std::function<void()>& fn, int repeats) {
  fn();
  synchronize(device);
  std::vector<double> times;
  Event start(device), end(device);
  for (int i = 0; i < repeats; ++i) {
    start.record();
    fn();
    end.record();
    end.synchronize();
    times.push_back(end.elapsed_ms_since(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double gflops(int64_t n, double seconds) { return 2.0 * static_cast<double>(n * n) * static_cast<double>(n) / seconds / 1e9; }

// --- (1) matrix product ---
WorkloadResult matmul(const RunOptions& o) {
  WorkloadResult r;
  const std::vector<int64_t> sizes = o.quick ? std::vector<int64_t>{64, 256, 512}
                                             : std::vector<int64_t>{64, 128, 256, 512, 1024, 2048, 4096};
  const int repeats = o.quick ? 3 : 5;
  std::vector<double> cpu_rate;
  for (int64_t n : sizes) {
    const Tensor a = rand({n, n}), b = rand({n, n});
    const double s = cpu_seconds_per_call([&] { (void)strata::matmul(a, b); }, repeats);
    cpu_rate.push_back(gflops(n, s));
    r.metrics.push_back({fmt::format("matmul_cpu_n{}", n), cpu_rate.back(), "GFLOP/s", Better::Higher,
                         fmt::format("f32 {}x{} @ {}x{}, result allocated", n, n, n, n)});
  }
  if (!cuda::is_available()) {
    r.notes.push_back(no_cuda_note() + "; so no CPU/GPU crossover size: the CPU is the only device here");
    return r;
  }
  struct GpuKind { const char* name; DType dtype; bool tf32; };
  const GpuKind kinds[] = {{"f32", DType::F32, false}, {"tf32", DType::F32, true}, {"bf16", DType::BF16, false}};
  int64_t crossover = -1;
  for (const GpuKind& kind : kinds) {
    set_allow_tf32(kind.tf32);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t n = sizes[i];
      const Tensor a = rand({n, n}, kGpu).to(kind.dtype), b = rand({n, n}, kGpu).to(kind.dtype);
      const double ms = gpu_ms_per_call(kGpu, [&] { (void)strata::matmul(a, b); }, repeats * 4);
      const double rate = gflops(n, ms / 1e3);
      r.metrics.push_back({fmt::format("matmul_gpu_{}_n{}", kind.name, n), rate, "GFLOP/s", Better::Higher,
                           fmt::format("{} on {}", kind.name, cuda::device_name(0))});
      if (kind.dtype == DType::F32 && !kind.tf32 && crossover < 0 && rate > cpu_rate[i]) crossover = n;
    }
  }
  set_allow_tf32(false);
  if (crossover > 0) {
    r.metrics.push_back({"matmul_crossover_n", static_cast<double>(crossover), "n", Better::Neither,
                         "smallest measured n at which the GPU (f32, device time) beats the CPU"});
  } else {
    r.notes.push_back("the CPU won at every measured size (f32)");
  }
  r.notes.push_back("GPU rates are device time between events; CPU rates are wall time");
  return r;
}

// --- (2) the Dive-into-Deep-Learning exercise (d2l_run is in the header: the contention workload runs it too) ---
WorkloadResult d2l(const RunOptions& o) {
  WorkloadResult r;
  const int products = 1000;
  std::vector<Device> devices{kCPU};
  if (cuda::is_available()) devices.push_back(kGpu);
  for (Device device : devices) {
    const std::string dev = device.is_cpu() ? "cpu" : "gpu";
    for (bool each : {true, false}) {
      D2lRun best{1e30, 0};
      for (int i = 0; i < (o.quick ? 1 : 3); ++i) {
        const D2lRun run = d2l_run(device, each, products);
        if (run.seconds < best.seconds) best = run;
      }
      const std::string how = each ? "read_each" : "log_on_device";
      r.metrics.push_back({fmt::format("d2l_{}_{}_ms", dev, how), best.seconds * 1e3, "ms", Better::Lower,
                           each ? "1000 products of 100x100, norm read (item) after each"
                                : "1000 products, norms kept on the device, read once"});
      r.metrics.push_back({fmt::format("d2l_{}_{}_syncs", dev, how), static_cast<double>(best.syncs), "syncs",
                           Better::Lower, "synchronisations counted by Strata (transfer_counters)"});
    }
  }
  r.notes.push_back("the norms are formatted into a string, not written to the terminal");
  r.notes.push_back("waits on the CPU device are not synchronisations, so the CPU counts are 0 by design");
  if (!cuda::is_available()) r.notes.push_back(no_cuda_note());
  return r;
}

// --- (3) vector add of 10M floats ---
WorkloadResult vector_add(const RunOptions& o) {
  WorkloadResult r;
  constexpr int64_t n = 10'000'000;
  const double bytes = 12.0 * n;  // read a and b, write c
  const int repeats = o.quick ? 5 : 15;

  std::vector<float> va(n, 1.5f), vb(n, 2.0f), vc(n, 0.0f);
  const float* pa = va.data();
  const float* pb = vb.data();
  float* pc = vc.data();
  const double loop_s = cpu_seconds_per_call(
      [&] {
        parallel_for(n, 32768, [=](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) pc[i] = pa[i] + pb[i];
        });
      },
      repeats);
  Tensor a = full({n}, 1.5f), b = full({n}, 2.0f);
  const double into_s = cpu_seconds_per_call([&] { add_(a, b); }, repeats);
  const Tensor a2 = full({n}, 1.5f);
  const double alloc_s = cpu_seconds_per_call([&] { (void)add(a2, b); }, repeats);
  const double loop = bytes / loop_s / 1e9, into = bytes / into_s / 1e9, alloc = bytes / alloc_s / 1e9;
  r.metrics.push_back({"vector_add_cpu_plain_loop_gbps", loop, "GB/s", Better::Higher,
                       fmt::format("c[i] = a[i] + b[i] on raw arrays over the same {} threads", num_threads())});
  r.metrics.push_back({"vector_add_cpu_into_gbps", into, "GB/s", Better::Higher, "add_(a, b): into existing memory"});
  r.metrics.push_back({"vector_add_cpu_alloc_gbps", alloc, "GB/s", Better::Higher, "c = a + b: allocates c"});
  r.metrics.push_back({"vector_add_cpu_into_fraction", into / loop, "x loop", Better::Higher, "target >= 0.95"});
  r.metrics.push_back({"vector_add_cpu_alloc_fraction", alloc / loop, "x loop", Better::Higher, "target >= 0.8"});
  r.notes.push_back("GB/s counts 12 bytes per element (two reads, one write)");
  if (!cuda::is_available()) {
    r.notes.push_back(no_cuda_note());
    return r;
  }
  Tensor ga = full({n}, 1.5f, kGpu), gb = full({n}, 2.0f, kGpu), gc = empty({n}, kGpu);
  const double copy_ms = gpu_ms_per_call(kGpu, [&] { gc.copy_(ga); }, repeats);
  const double into_ms = gpu_ms_per_call(kGpu, [&] { add_(ga, gb); }, repeats);
  const double alloc_ms = gpu_ms_per_call(kGpu, [&] { (void)add(ga, gb); }, repeats);
  const double copy = 8.0 * n / copy_ms / 1e6, ginto = bytes / into_ms / 1e6, galloc = bytes / alloc_ms / 1e6;
  r.metrics.push_back({"vector_add_gpu_copy_gbps", copy, "GB/s", Better::Higher, "device-to-device copy_ (8 B/elem)"});
  r.metrics.push_back({"vector_add_gpu_into_gbps", ginto, "GB/s", Better::Higher, "add_ on cuda:0"});
  r.metrics.push_back({"vector_add_gpu_alloc_gbps", galloc, "GB/s", Better::Higher, "c = a + b on cuda:0"});
  r.metrics.push_back({"vector_add_gpu_into_fraction", ginto / copy, "x copy", Better::Higher, "target >= 0.9"});
  return r;
}

// --- (4) two devices at once vs one after the other ---
// Two GPUs when there are: one host thread queues the products on both, as the work is asynchronous. Otherwise two
// virtual CPU devices (main() turns them on): CPU work runs on the calling thread, so each device gets a host thread
// of its own, and the cores are shared between them (Note [Sharing the cores between devices]). There the ideal is
// "no slower than one after the other"; running twice as many threads as cores would make it slower.
WorkloadResult two_gpus(const RunOptions& o) {
  WorkloadResult r;
  const Device d0(DeviceType::CUDA, 0), d1(DeviceType::CUDA, 1);
  const int64_t n = 4096;
  const int products = o.quick ? 10 : 50;
  const Tensor a0 = rand({n, n}, d0), b0 = rand({n, n}, d0), a1 = rand({n, n}, d1), b1 = rand({n, n}, d1);
  auto work = [&](const Tensor& a, const Tensor& b) {
    for (int i = 0; i < products; ++i) (void)strata::matmul(a, b);
  };
  const double serial = median_seconds(
      [&] {
        work(a0, b0);
        synchronize(d0);
        work(a1, b1);
        synchronize(d1);
      },
      3);
  const double both = median_seconds(
      [&] {
        work(a0, b0);
        work(a1, b1);
        synchronize(d0);
        synchronize(d1);
      },
      3);
  r.metrics.push_back({"multi_gpu_serial_ms", serial * 1e3, "ms", Better::Lower,
                       fmt::format("{} f32 products n={} on cuda:0, then on cuda:1", products, n)});
  r.metrics.push_back({"multi_gpu_concurrent_ms", both * 1e3, "ms", Better::Lower, "the same, both GPUs at once"});
  r.metrics.push_back({"multi_gpu_speedup", serial / both, "x", Better::Higher, "ideal 2"});
  r.notes.push_back("devices: cuda:0 and cuda:1");
  return r;
}

// One after the other, then a host thread per device at once: the two times and their ratio, under `key`.
void time_on_two_devices(WorkloadResult& r, const std::string& key, const std::string& what,
                         const std::function<void(Device)>& work) {
  const Device d0(DeviceType::CPU, 0), d1(DeviceType::CPU, 1);
  const double serial = median_seconds(
      [&] {
        work(d0);
        work(d1);
      },
      5);
  const double both = median_seconds(
      [&] {
        std::thread second([&] { work(d1); });
        work(d0);
        second.join();
      },
      5);
  r.metrics.push_back({key + "_serial_ms", serial * 1e3, "ms", Better::Lower, what + " on cpu:0, then on cpu:1"});
  r.metrics.push_back({key + "_concurrent_ms", both * 1e3, "ms", Better::Lower, "the same, a host thread per device"});
  r.metrics.push_back({key + "_ratio", both / serial, "x", Better::Lower,
                       "at once / one after the other: ideal 1 (the devices share the cores)"});
}

WorkloadResult two_cpu_devices(const RunOptions& o) {
  WorkloadResult r;
  // Steps of a small MLP, forward and backward; and a chain of elementwise ops on 200k floats, each op one short
  // parallel region, where a descheduled thread stalls the region.
  const int64_t batch = 64, width = 512, n = 200000;
  const int steps = o.quick ? 10 : 40, ops = o.quick ? 200 : 1000;
  time_on_two_devices(r, "two_cpu_devices_mlp",
                      fmt::format("{} MLP steps ({}x{} @ {}x{}, relu, @ {}x10, backward)", steps, batch, width, width,
                                  width, width),
                      [&](Device d) {
                        const Tensor x = randn({batch, width}, d);
                        const Tensor w1 = randn({width, width}, d).requires_grad_();
                        const Tensor w2 = randn({width, 10}, d).requires_grad_();
                        for (int i = 0; i < steps; ++i) sum(matmul(relu(matmul(x, w1)), w2)).backward();
                      });
  time_on_two_devices(r, "two_cpu_devices_elementwise", fmt::format("{} times a = a * 0.5 + b, {} floats", ops, n),
                      [&](Device d) {
                        Tensor a = rand({n}, d);
                        const Tensor b = rand({n}, d);
                        for (int i = 0; i < ops; ++i) a = a * 0.5 + b;
                      });
  r.notes.push_back(fmt::format("devices: cpu:0 and cpu:1, virtual CPU devices sharing {} threads (fewer than two "
                                "GPUs here{})",
                                num_threads(), cuda::is_available() ? "" : "; CUDA unavailable"));
  return r;
}

WorkloadResult two_devices(const RunOptions& o) {
  if (cuda::is_available() && cuda::device_count() >= 2) return two_gpus(o);
  if (device_count(DeviceType::CPU) >= 2) return two_cpu_devices(o);
  WorkloadResult r;
  r.skipped = true;
  r.skip_reason = "needs two GPUs or two virtual CPU devices (STRATA_CPU_DEVICES=2)";
  return r;
}

// --- (5) conv2d and Linear ---
struct ConvLayer {
  ConvLayer(Device device, bool grad)
      : input(randn({64, 32, 14, 14}, device)), weight(randn({64, 32, 3, 3}, device) * 0.1),
        bias(zeros({64}, device)), grad_output(ones({64, 64, 14, 14}, device)) {
    if (grad) {
      input.requires_grad_();
      weight.requires_grad_();
      bias.requires_grad_();
    }
  }
  void forward() const { (void)F::conv2d(input, weight, bias, 1, 1); }
  void forward_backward() {
    input.set_grad(Tensor());
    weight.set_grad(Tensor());
    bias.set_grad(Tensor());
    F::conv2d(input, weight, bias, 1, 1).backward(grad_output);
  }
  Tensor input, weight, bias, grad_output;
};

struct LinearLayer {
  explicit LinearLayer(Device device)
      : input(randn({64, 3136}, device)), weight(randn({128, 3136}, device) * 0.02), bias(zeros({128}, device)),
        grad_output(ones({64, 128}, device)) {
    input.requires_grad_();
    weight.requires_grad_();
    bias.requires_grad_();
  }
  void forward_backward() {
    input.set_grad(Tensor());
    weight.set_grad(Tensor());
    bias.set_grad(Tensor());
    F::linear(input, weight, bias).backward(grad_output);
  }
  Tensor input, weight, bias, grad_output;
};

// Medians of per-call seconds of a and b timed in alternate batches (each ~batch_s long), and the median of their
// ratio round by round: on a shared machine a burst of load then falls on both sides of a round alike.
struct Paired {
  double a, b, ratio;
};
Paired paired_seconds(const std::function<void()>& a, const std::function<void()>& b, int rounds,
                      double batch_s = 0.03) {
  const auto batch_of = [&](const std::function<void()>& fn) {
    fn();
    const double once = median_seconds(fn, 3, 0);
    return std::max(1, static_cast<int>(batch_s / std::max(once, 1e-9)));
  };
  const int na = batch_of(a), nb = batch_of(b);
  const auto per_call = [](const std::function<void()>& fn, int n) {
    return median_seconds(
               [&] {
                 for (int i = 0; i < n; ++i) fn();
               },
               1, 0) /
           n;
  };
  std::vector<double> ta, tb, ratios;
  for (int i = 0; i < rounds; ++i) {
    ta.push_back(per_call(a, na));
    tb.push_back(per_call(b, nb));
    ratios.push_back(ta.back() / tb.back());
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  return {median(ta), median(tb), median(ratios)};
}

// One of the reference network's convolutions as the epoch runs it (Note [Activations in oneDNN's blocked layout]):
// the first reads NCHW and writes the blocked layout, the second reads and writes it; a first layer's input asks for
// no gradient.
struct BlockedConvLayer {
  BlockedConvLayer(const ConvFloorShape& s, int64_t block)
      : first(!s.backward_data),
        block(block),
        input(first ? randn({s.n, s.c, s.h, s.w}) : randn({s.n, s.c / block, s.h, s.w, block})),
        weight(randn({s.o, s.c, 3, 3}) * 0.1),
        bias(zeros({s.o})),
        grad_output(ones({s.n, s.o / block, s.h, s.w, block})) {
    if (!first) input.requires_grad_();
    weight.requires_grad_();
    bias.requires_grad_();
  }
  Tensor call() const { return nn::blocked::conv2d(input, weight, bias, 1, 1, 1, 1, first ? 0 : block, block); }
  void forward_backward() {
    input.set_grad(Tensor());
    weight.set_grad(Tensor());
    bias.set_grad(Tensor());
    call().backward(grad_output);
  }
  bool first;
  int64_t block;
  Tensor input, weight, bias, grad_output;
};

// Note [The convolution floor] (conv_floor.cpp): Strata's time over oneDNN's primitives alone, on the reference
// network's two convolutions as the epoch runs them, and on the NCHW layer above (a convolution called by itself).
void conv_floor(const RunOptions& o, WorkloadResult& r) {
  const int64_t block = nn::blocked::block_size(kCPU, DType::F32);
  if (block == 0) {
    r.notes.push_back("no oneDNN floor: this build's CPU convolutions do not run on oneDNN");
    return;
  }
  const int rounds = o.quick ? 5 : 15;
  const ConvFloorShape shapes[] = {{64, 1, 28, 28, 32, false}, {64, 32, 14, 14, 64, true}};
  double strata_fwd = 0, onednn_fwd = 0, strata_fb = 0, onednn_fb = 0;
  for (int layer = 0; layer < 2; ++layer) {
    const ConvFloorShape& s = shapes[layer];
    const std::unique_ptr<OneDnnConvFloor> floor = OneDnnConvFloor::make(s);
    if (floor == nullptr) {
      r.notes.push_back("no oneDNN floor: strata-bench was built without oneDNN");
      return;
    }
    BlockedConvLayer ours(s, block);
    Paired fwd{};
    {
      NoGradGuard no_grad;
      fwd = paired_seconds([&] { (void)ours.call(); }, [&] { floor->forward(); }, rounds);
    }
    const Paired fb = paired_seconds([&] { ours.forward_backward(); }, [&] { floor->forward_backward(); }, rounds);
    const std::string key = fmt::format("conv2d_cpu_l{}", layer + 1);
    const std::string shape = fmt::format("[{},{},{},{}] x [{},{},3,3]", s.n, s.c, s.h, s.w, s.o, s.c);
    r.metrics.push_back({key + "_fwd_bwd_ms", fb.a * 1e3, "ms", Better::Lower,
                         shape + (s.backward_data ? ", blocked in and out, all gradients"
                                                  : ", NCHW in, blocked out, weight and bias gradients")});
    r.metrics.push_back({key + "_onednn_fwd_bwd_ms", fb.b * 1e3, "ms", Better::Lower,
                         "oneDNN's primitives alone, same passes"});
    r.metrics.push_back({key + "_over_onednn_fwd", fwd.ratio, "x", Better::Lower,
                         fmt::format("forward, median of {} paired rounds ({:.3f} / {:.3f} ms)", rounds, fwd.a * 1e3,
                                     fwd.b * 1e3)});
    r.metrics.push_back({key + "_over_onednn_fwd_bwd", fb.ratio, "x", Better::Lower,
                         fmt::format("forward + backward, median of {} paired rounds", rounds)});
    r.notes.push_back(fmt::format("layer {} oneDNN floor: {}", layer + 1, floor->describe()));
    strata_fwd += fwd.a;
    onednn_fwd += fwd.b;
    strata_fb += fb.a;
    onednn_fb += fb.b;
  }
  r.metrics.push_back({"conv2d_cpu_over_onednn_fwd", strata_fwd / onednn_fwd, "x", Better::Lower,
                       "both layers' forward, Strata's medians over oneDNN's"});
  r.metrics.push_back({"conv2d_cpu_over_onednn_fwd_bwd", strata_fb / onednn_fb, "x", Better::Lower,
                       "both layers' forward + backward (target: at most 1.05)"});
  // The NCHW layer: Strata relays out in and out of oneDNN's layouts each call, which the floor does not.
  const std::unique_ptr<OneDnnConvFloor> floor = OneDnnConvFloor::make(shapes[1]);
  ConvLayer nchw(kCPU, true);
  const Paired fb = paired_seconds([&] { nchw.forward_backward(); }, [&] { floor->forward_backward(); }, rounds);
  r.metrics.push_back({"conv2d_cpu_nchw_over_onednn_fwd_bwd", fb.ratio, "x", Better::Lower,
                       "the NCHW layer above (reorders in and out each call) over layer 2's floor"});
}

WorkloadResult conv(const RunOptions& o) {
  WorkloadResult r;
  const int repeats = o.quick ? 5 : 21;
  {
    NoGradGuard no_grad;
    const ConvLayer fwd(kCPU, false);
    r.metrics.push_back({"conv2d_cpu_fwd_ms", cpu_seconds_per_call([&] { fwd.forward(); }, repeats) * 1e3, "ms",
                         Better::Lower, "[64,32,14,14] x [64,32,3,3], pad 1, bias, f32"});
  }
  ConvLayer fb(kCPU, true);
  r.metrics.push_back({"conv2d_cpu_fwd_bwd_ms", cpu_seconds_per_call([&] { fb.forward_backward(); }, repeats) * 1e3,
                       "ms", Better::Lower, "forward + input, weight and bias gradients"});
  LinearLayer lin(kCPU);
  r.metrics.push_back({"linear_cpu_fwd_bwd_ms", cpu_seconds_per_call([&] { lin.forward_backward(); }, repeats) * 1e3,
                       "ms", Better::Lower, "[64,3136] x [128,3136]^T + bias, all gradients"});
  conv_floor(o, r);
  if (!cuda::is_available()) {
    r.notes.push_back(no_cuda_note());
    return r;
  }
  for (bool tf32 : {false, true}) {
    set_allow_tf32(tf32);
    const std::string kind = tf32 ? "tf32" : "f32";
    ConvLayer gfwd(kGpu, false), gfb(kGpu, true);
    LinearLayer glin(kGpu);
    {
      NoGradGuard no_grad;
      r.metrics.push_back({"conv2d_gpu_" + kind + "_fwd_ms", gpu_ms_per_call(kGpu, [&] { gfwd.forward(); }, repeats),
                           "ms", Better::Lower, "cuDNN, device time"});
    }
    r.metrics.push_back({"conv2d_gpu_" + kind + "_fwd_bwd_ms",
                         gpu_ms_per_call(kGpu, [&] { gfb.forward_backward(); }, repeats), "ms", Better::Lower,
                         "device time"});
    r.metrics.push_back({"linear_gpu_" + kind + "_fwd_bwd_ms",
                         gpu_ms_per_call(kGpu, [&] { glin.forward_backward(); }, repeats), "ms", Better::Lower,
                         "device time"});
  }
  set_allow_tf32(false);
  return r;
}

}  // namespace

// Note [The machine's peak FMA rate]
// The FLOP floor of an epoch (Note [The FLOP floor] in tools/train/trainer.cpp) divides its arithmetic by the
// machine's peak f32 rate, so the rate must be the hardware's, not a library's: on x86-64 it is timed with a tight
// loop of fused multiply-adds on every thread of the pool, each thread running many independent chains of FMAs on
// full vector registers (enough chains to cover the FMA latency on every FMA pipe, few enough to stay in registers),
// with AVX-512 and with AVX2, and the faster one counts, as a CPU may run either at its peak (Zen 4 runs AVX-512 on
// 256-bit units, so both give the same rate there; Intel server cores with two 512-bit FMA units need AVX-512). A
// large sgemm through the CPU backend's GEMM was the other candidate; it is what the epoch's convolutions actually
// run on, but it measures a library's efficiency (packing, blocking, 85-95 % of peak), which is part of what the ratio
// to the floor should show rather than hide. It stays as the fallback where there is no loop for the CPU (other
// architectures, x86 without FMA), where the rate is then a lower bound of the peak and the floor an upper bound.
// Each of num_threads() threads (two on an SMT core share its FMA units, which the wall time then shows) runs the
// same work, started together, and the best of several runs counts: a peak is what the machine can do, and on a
// shared machine other processes only ever make it look slower.
namespace {

// Per call: ~0.5-1 ms of work on a current core, so one timed run (32 calls a thread) lasts ~25 ms: long enough for
// the clock to settle and to span scheduler ticks, short enough that the best of several finds a quiet stretch.
constexpr int64_t kFmaIterations = 200000;

#if defined(__x86_64__)
// 16 chains of 16 floats: 16 zmm accumulators and 2 constants of the 32 registers.
constexpr int kChains512 = 16;
__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iterations, float start) {
  __m512 acc[kChains512];
  for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_set1_ps(start + static_cast<float>(j));
  // acc = acc * m + a converges to a / (1 - m) = 1: no overflow, no denormals, nothing to fold away.
  const __m512 m = _mm512_set1_ps(0.999f), a = _mm512_set1_ps(0.001f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, a);
  }
  __m512 total = acc[0];
  for (int j = 1; j < kChains512; ++j) total = _mm512_add_ps(total, acc[j]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, total);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

// 12 chains of 8 floats: 12 ymm accumulators and 2 constants of the 16 registers.
constexpr int kChains256 = 12;
__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iterations, float start) {
  __m256 acc[kChains256];
  for (int j = 0; j < kChains256; ++j) acc[j] = _mm256_set1_ps(start + static_cast<float>(j));
  const __m256 m = _mm256_set1_ps(0.999f), a = _mm256_set1_ps(0.001f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int j = 0; j < kChains256; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, a);
  }
  __m256 total = acc[0];
  for (int j = 1; j < kChains256; ++j) total = _mm256_add_ps(total, acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, total);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}
#endif

// FLOP/s of `chains(kFmaIterations)` run 32 times on each of num_threads() threads of its own, all at once, best of
// `repeats`; `flops_per_call` counts 2 per FMA per lane. Threads of its own rather than parallel_for's pool: the
// hardware's rate is wanted, not how the pool hands out chunks and wakes its helpers.
double fma_rate(float (*chains)(int64_t, float), double flops_per_call, int repeats) {
  const int threads = num_threads();
  constexpr int kCallsPerThread = 32;
  std::vector<float> sink(static_cast<std::size_t>(threads));
  auto run = [&] {
    std::vector<std::thread> team;
    for (int t = 0; t < threads; ++t) {
      team.emplace_back([&sink, chains, t] {
        float s = 0;
        // Each call starts from other values, so the calls cannot be merged into one.
        for (int c = 0; c < kCallsPerThread; ++c) s += chains(kFmaIterations, static_cast<float>(c));
        sink[static_cast<std::size_t>(t)] = s;
      });
    }
    for (std::thread& th : team) th.join();
  };
  run();  // warm-up: clocks up
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) best = std::min(best, median_seconds(run, 1, 0));
  if (sink.front() != sink.front()) throw std::runtime_error("the FMA loop produced NaN");  // keeps the sink used
  return flops_per_call * kCallsPerThread * threads / best;
}

}  // namespace

PeakRate cpu_peak_rate(bool quick) {
  const int repeats = quick ? 3 : 7;
  const int threads = num_threads();
  PeakRate best;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    const double rate = fma_rate(fma_chains_avx512, 2.0 * kFmaIterations * kChains512 * 16, repeats);
    if (rate > best.flops_per_second) {
      best = {rate, fmt::format("AVX-512 FMA loop, {} chains per thread, {} threads", kChains512, threads)};
    }
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    const double rate = fma_rate(fma_chains_avx2, 2.0 * kFmaIterations * kChains256 * 8, repeats);
    if (rate > best.flops_per_second) {
      best = {rate, fmt::format("AVX2 FMA loop, {} chains per thread, {} threads", kChains256, threads)};
    }
  }
#endif
  if (best.flops_per_second == 0) {
    // No FMA loop for this CPU: the backend's sgemm, a lower bound of the peak.
    constexpr int64_t n = 2048;
    const Tensor a = rand({n, n}), b = rand({n, n});
    const double s = median_seconds([&] { (void)strata::matmul(a, b); }, repeats, 1);
    best = {gflops(n, s) * 1e9, fmt::format("sgemm n={} through the CPU backend, {} threads (no FMA loop for this "
                                            "CPU: a lower bound of the peak)", n, threads)};
  }
  return best;
}

std::vector<Workload> compute_workloads() {
  return {{"matmul", "1. matrix product, f32 GFLOP/s", matmul},
          {"d2l", "2. D2L: 1000 products of 100x100, norm after each vs logged on the device", d2l},
          {"vector_add", "3. vector add of 10M floats", vector_add},
          {"two_devices", "4. two devices at once vs one after the other (two GPUs, else two virtual CPU devices)",
           two_devices},
          {"conv", "5. conv2d and Linear, forward and forward+backward", conv}};
}

}  // namespace strata::bench
