// System workloads of strata-bench: a training epoch, per-op overhead and the allocator, start-up and compile time.
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include "strata/data/fashion_mnist.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "suite.h"
#include "trainer.h"

extern char** environ;

namespace strata::bench {
namespace {

const Device kGpu(DeviceType::CUDA, 0);

std::shared_ptr<data::TensorDataset> first(const data::FashionMnist& set, int64_t n) {
  n = std::min(n, set.size());
  return std::make_shared<data::TensorDataset>(set.images().narrow(0, 0, n), set.labels().narrow(0, 0, n));
}

}  // namespace

train::EpochReport timed_epoch(const std::string& data_dir, Device device, int64_t images) {
  const data::FashionMnist train_split(data_dir, data::Split::Train);
  const data::FashionMnist test_split(data_dir, data::Split::Test);
  // Evaluation after the epoch is not timed (EpochReport::seconds covers training only); a few test images keep it
  // short.
  const auto test = first(test_split, 64);
  train::TrainOptions options;
  options.recipe = train::Recipe::Reference;  // SGD lr 0.01 momentum 0.9, batch 64
  options.epochs = 1;
  options.device = device;
  // Warm-up: primitive caches, the allocator's pools, the loader's thread.
  train::Trainer(options, first(train_split, 640), test).run_epoch();
  train::Trainer trainer(options, first(train_split, images), test);
  return trainer.run_epoch();
}

namespace {

// --- (6) one epoch of the reference network ---

// The CPU epoch's FLOP floor beside it (Note [The FLOP floor] in tools/train/trainer.cpp): the epoch's FLOPs, counted
// from the reference network's layer shapes, at the machine's peak rate (Note [The machine's peak FMA rate]).
void add_floor(WorkloadResult& r, const train::EpochReport& report, bool quick) {
  // Building the network draws its weights from the CPU's generator: leave the generator as it was.
  const GeneratorState rng = default_generator(kCPU).state();
  const int64_t per_image = train::training_flops_per_example(*train::reference_network(kCPU), {1, 28, 28});
  default_generator(kCPU).set_state(rng);
  const PeakRate peak = cpu_peak_rate(quick);
  const double images = std::round(report.seconds * report.images_per_second);
  const double flops = static_cast<double>(per_image) * images;
  const double floor_s = flops / peak.flops_per_second;
  r.metrics.push_back({"cpu_peak_gflops", peak.flops_per_second / 1e9, "GFLOP/s", Better::Neither, peak.how});
  r.metrics.push_back({"epoch_gflop", flops / 1e9, "GFLOP", Better::Neither,
                       fmt::format("{:.1f} MFLOP per image x {:.0f} images: conv and linear multiply-adds, forward "
                                   "and backward",
                                   static_cast<double>(per_image) / 1e6, images)});
  r.metrics.push_back({"epoch_floor_s", floor_s, "s", Better::Neither,
                       "the epoch's FLOPs at the peak rate: no epoch on this machine can be faster"});
  r.metrics.push_back({"epoch_over_floor", report.seconds / floor_s, "x floor", Better::Lower,
                       "the CPU epoch's time / its floor (1 would be every core doing FMAs all the time)"});
  r.notes.push_back("the peak rate is measured, not looked up: other work on the machine (see the load average) makes "
                    "it low, the floor long and epoch_over_floor small");
}
WorkloadResult epoch(const RunOptions& o) {
  WorkloadResult r;
  const int64_t images = o.quick ? 3200 : std::numeric_limits<int64_t>::max();  // all of them, when not quick
  std::vector<Device> devices{kCPU};
  if (cuda::is_available()) devices.push_back(kGpu);
  for (Device device : devices) {
    const train::EpochReport report = timed_epoch(o.data_dir, device, images);
    const std::string dev = device.is_cpu() ? "cpu" : "gpu";
    r.metrics.push_back({"epoch_" + dev + "_seconds", report.seconds, "s", Better::Lower,
                         fmt::format("{} training images, batch 64, SGD lr 0.01 momentum 0.9",
                                     std::llround(report.seconds * report.images_per_second))});
    r.metrics.push_back({"epoch_" + dev + "_images_per_s", report.images_per_second, "img/s", Better::Higher,
                         fmt::format("train loss {:.3f}, {} synchronisations", report.train_loss,
                                     report.synchronizations)});
    if (device.is_cpu()) add_floor(r, report, o.quick);
  }
  r.notes.push_back("one timed epoch after a 10-step warm-up (an epoch is long enough not to need a median)");
  if (o.quick) r.notes.push_back("--quick: the first 3200 training images only");
  if (!cuda::is_available()) r.notes.push_back("GPU epoch not measured: CUDA unavailable");
  if (cuda::is_available()) r.notes.push_back("the floor is the CPU epoch's: the GPU's peak rate is not measured");
  return r;
}

// --- (7) per-op overhead and the allocator ---
double ns_per_call(const std::function<void()>& fn, int calls, int repeats) {
  return median_seconds(
             [&] {
               for (int i = 0; i < calls; ++i) fn();
             },
             repeats) /
         calls * 1e9;
}

WorkloadResult overhead(const RunOptions& o) {
  WorkloadResult r;
  const int calls = o.quick ? 20000 : 200000;
  const int repeats = o.quick ? 5 : 11;
  const Tensor a = full({16}, 1.5f), b = full({16}, 2.0f);
  r.metrics.push_back({"tiny_add_cpu_ns", ns_per_call([&] { (void)add(a, b); }, calls, repeats), "ns/op",
                       Better::Lower, "c = a + b on two 16-element f32 tensors, result allocated"});
  Tensor c = full({16}, 1.5f);
  r.metrics.push_back({"tiny_add_inplace_cpu_ns", ns_per_call([&] { add_(c, b); }, calls, repeats), "ns/op",
                       Better::Lower, "a += b on 16 elements"});
  // The mix of sizes a training step asks for, allocated and freed at once (the cache serves all but the first).
  const std::size_t sizes[] = {512, 4096, 65536, 1 << 20, 16 << 20};
  size_t next = 0;
  r.metrics.push_back({"allocator_cpu_ns",
                       ns_per_call([&] { (void)allocate(kCPU, sizes[next++ % 5]); }, calls, repeats), "ns/alloc",
                       Better::Lower, "allocate + free through the caching allocator, 512 B .. 16 MiB"});
  r.metrics.push_back({"empty_cpu_ns", ns_per_call([&] { (void)empty({int64_t(sizes[next++ % 5] / 4)}); }, calls, repeats),
                       "ns/op", Better::Lower, "empty() of the same sizes: tensor + allocation + free"});
  if (!cuda::is_available()) {
    r.notes.push_back("GPU overhead not measured: CUDA unavailable");
    return r;
  }
  const Tensor ga = full({16}, 1.5f, kGpu), gb = full({16}, 2.0f, kGpu);
  r.metrics.push_back({"tiny_add_gpu_ns",
                       ns_per_call(
                           [&] {
                             for (int i = 0; i < 255; ++i) (void)add(ga, gb);
                             (void)add(ga, gb);
                             synchronize(kGpu);
                           },
                           calls / 256, repeats) /
                           256,
                       "ns/op", Better::Lower, "host cost per queued add, 256 per synchronisation"});
  r.metrics.push_back({"allocator_gpu_ns",
                       ns_per_call([&] { (void)allocate(kGpu, sizes[next++ % 5]); }, calls, repeats), "ns/alloc",
                       Better::Lower, "allocate + free on cuda:0"});
  return r;
}

// --- (8) start-up and compile time ---

// Wall seconds of running argv to its exit; throws when it cannot start or fails.
double run_seconds(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
    throw std::runtime_error("could not start " + args[0]);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    throw std::runtime_error(fmt::format("{} failed with exit status {}", args[0], WEXITSTATUS(status)));
  }
  if (!WIFEXITED(status)) {
    throw std::runtime_error(
        fmt::format("{} was killed by signal {}", args[0], WIFSIGNALED(status) ? WTERMSIG(status) : -1));
  }
  return s;
}

WorkloadResult startup(const RunOptions& o) {
  WorkloadResult r;
  const std::string first_op = o.self_dir + "/strata-bench-first-op";
  if (std::filesystem::exists(first_op)) {
    const double s = median_seconds([&] { run_seconds({first_op}); }, o.quick ? 3 : 9);
    r.metrics.push_back({"startup_first_op_ms", s * 1e3, "ms", Better::Lower,
                         "spawn strata-bench-first-op (ones + ones, read) to its exit; target <= 50 ms"});
  } else {
    r.notes.push_back("start-up not measured: " + first_op + " is missing");
  }
  std::error_code ec;
  const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  if (ec) throw std::runtime_error("no temporary directory to compile in (is TMPDIR set to one?): " + ec.message());
  const std::filesystem::path out_dir = tmp / fmt::format("strata-bench-{}", getpid());
  std::filesystem::create_directories(out_dir);
  const std::vector<std::string> compile{STRATA_BENCH_CXX,  "-std=c++20", "-O2", "-I" STRATA_BENCH_SOURCE_DIR,
                                         STRATA_BENCH_SOURCE_DIR "/tools/bench/small_train.cpp",
                                         "-o", (out_dir / "small_train").string(), STRATA_BENCH_LIBSTRATA,
                                         "-Wl,-rpath," STRATA_BENCH_LIB_DIR, "-lfmt", "-pthread"};
  if (std::filesystem::exists(STRATA_BENCH_SOURCE_DIR "/tools/bench/small_train.cpp") &&
      std::filesystem::exists(STRATA_BENCH_LIBSTRATA)) {
    const double s = median_seconds([&] { run_seconds(compile); }, o.quick ? 1 : 3, 0);
    r.metrics.push_back({"compile_train_program_s", s, "s", Better::Lower,
                         "g++ -O2 of tools/bench/small_train.cpp (includes <strata/strata.h>) + link; target <= 5 s"});
    r.notes.push_back(fmt::format("compile command: {}", fmt::join(compile, " ")));
  } else {
    r.notes.push_back("compile time not measured: the source tree or libstrata of this build is gone");
  }
  std::filesystem::remove_all(out_dir);
  r.notes.push_back("the compiler is run directly (no ccache), on one core");
  return r;
}

}  // namespace

std::vector<Workload> system_workloads() {
  return {{"epoch", "6. one epoch of the reference Fashion-MNIST network", epoch},
          {"overhead", "7. per-op overhead on tiny tensors and allocator throughput", overhead},
          {"startup", "8. process start-up to the first op, compile+link of a training program", startup}};
}

}  // namespace strata::bench
