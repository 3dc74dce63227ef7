// The workloads of strata-bench (tools/bench) written against LibTorch, with the same metric keys, printed as one
// JSON document: {"tool": "libtorch", "workloads": {name: {"metrics": {key: {"value", "unit", "better"}}}}}.
// Built and run by bench/compare-libtorch/run; arguments: [--quick] [--only a,b] [--data DIR] [--first-op PATH].
#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>
#include <spawn.h>
#include <sys/wait.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

#include "../../tools/bench/busy_cores.h"
#include "common.h"

namespace {

using compare::Clock;

using compare::median_seconds;
using compare::environment;
using compare::seconds_per_call;

double ns_per_call(const std::function<void()>& fn, int calls, int repeats) {
  return median_seconds([&] { for (int i = 0; i < calls; ++i) fn(); }, repeats) / calls * 1e9;
}

struct Options {
  bool quick = false;
  std::string data_dir;
  std::string first_op;
};

using Metrics = nlohmann::json;
void put(Metrics& m, const std::string& key, double value, const std::string& unit, const char* better) {
  m[key] = {{"value", value}, {"unit", unit}, {"better", better}};
}

Metrics matmul(const Options& o) {
  Metrics m;
  const std::vector<int64_t> sizes = o.quick ? std::vector<int64_t>{64, 256, 512}
                                             : std::vector<int64_t>{64, 128, 256, 512, 1024, 2048, 4096};
  for (int64_t n : sizes) {
    const auto a = torch::rand({n, n}), b = torch::rand({n, n});
    const double s = seconds_per_call([&] { (void)torch::matmul(a, b); }, o.quick ? 3 : 5);
    put(m, "matmul_cpu_n" + std::to_string(n), 2.0 * n * n * n / s / 1e9, "GFLOP/s", "higher");
  }
  return m;
}

// The D2L exercise once after a warm-up: 1000 products of 100x100, each norm read at once or logged and read at
// the end.
double d2l_seconds(const torch::Tensor& a, const torch::Tensor& b, bool each) {
  std::string printed;
  return median_seconds(
      [&] {
        printed.clear();
        std::vector<torch::Tensor> log;
        for (int i = 0; i < 1000; ++i) {
          const auto c = torch::matmul(a, b);
          if (each) {
            printed += std::to_string(c.norm().item<float>()) + "\n";
          } else {
            log.push_back(c.norm());
          }
        }
        if (!each) {
          const auto norms = torch::stack(log).to(torch::kCPU);
          for (int64_t i = 0; i < norms.size(0); ++i) printed += std::to_string(norms.data_ptr<float>()[i]) + "\n";
        }
      },
      1, 1);
}

Metrics d2l(const Options& o) {
  Metrics m;
  const auto a = torch::randn({100, 100}) * 0.1, b = torch::randn({100, 100}) * 0.1;
  for (bool each : {true, false}) {
    double best = 1e30;
    for (int r = 0; r < (o.quick ? 1 : 3); ++r) best = std::min(best, d2l_seconds(a, b, each));
    put(m, each ? "d2l_cpu_read_each_ms" : "d2l_cpu_log_on_device_ms", best * 1e3, "ms", "lower");
  }
  return m;
}

Metrics vector_add(const Options& o) {
  Metrics m;
  constexpr int64_t n = 10'000'000;
  const double bytes = 12.0 * n;
  const int repeats = o.quick ? 5 : 15;
  std::vector<float> va(n, 1.5f), vb(n, 2.0f), vc(n, 0.0f);
  const float* pa = va.data();
  const float* pb = vb.data();
  float* pc = vc.data();
  const double loop_s = seconds_per_call(
      [&] {
        at::parallel_for(0, n, 32768, [=](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) pc[i] = pa[i] + pb[i];
        });
      },
      repeats);
  const auto a = torch::full({n}, 1.5f), b = torch::full({n}, 2.0f);
  auto c = torch::empty({n});
  const double into_s = seconds_per_call([&] { torch::add_out(c, a, b); }, repeats);
  const double alloc_s = seconds_per_call([&] { (void)(a + b); }, repeats);
  const double loop = bytes / loop_s / 1e9, into = bytes / into_s / 1e9, alloc = bytes / alloc_s / 1e9;
  put(m, "vector_add_cpu_plain_loop_gbps", loop, "GB/s", "higher");
  put(m, "vector_add_cpu_into_gbps", into, "GB/s", "higher");
  put(m, "vector_add_cpu_alloc_gbps", alloc, "GB/s", "higher");
  put(m, "vector_add_cpu_into_fraction", into / loop, "x loop", "higher");
  put(m, "vector_add_cpu_alloc_fraction", alloc / loop, "x loop", "higher");
  return m;
}

Metrics conv(const Options& o) {
  Metrics m;
  const int repeats = o.quick ? 5 : 21;
  auto input = torch::randn({64, 32, 14, 14}), weight = torch::randn({64, 32, 3, 3}) * 0.1,
       bias = torch::zeros({64}), grad_output = torch::ones({64, 64, 14, 14});
  {
    torch::NoGradGuard no_grad;
    put(m, "conv2d_cpu_fwd_ms",
        seconds_per_call([&] { (void)torch::conv2d(input, weight, bias, 1, 1); }, repeats) * 1e3, "ms", "lower");
  }
  input.requires_grad_();
  weight.requires_grad_();
  bias.requires_grad_();
  auto clear = [](std::initializer_list<torch::Tensor*> ts) {
    for (auto* t : ts) t->mutable_grad() = torch::Tensor();
  };
  put(m, "conv2d_cpu_fwd_bwd_ms", seconds_per_call([&] {
        clear({&input, &weight, &bias});
        torch::conv2d(input, weight, bias, 1, 1).backward(grad_output);
      }, repeats) * 1e3, "ms", "lower");
  auto x = torch::randn({64, 3136}).requires_grad_(), w = (torch::randn({128, 3136}) * 0.02).requires_grad_(),
       bl = torch::zeros({128}).requires_grad_();
  const auto gl = torch::ones({64, 128});
  put(m, "linear_cpu_fwd_bwd_ms", seconds_per_call([&] {
        clear({&x, &w, &bl});
        torch::nn::functional::linear(x, w, bl).backward(gl);
      }, repeats) * 1e3, "ms", "lower");
  return m;
}

// The reference network of strata-train, trained as its Reference recipe trains it.
struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)))),
        fc1(register_module("fc1", torch::nn::Linear(64 * 7 * 7, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);
    return fc2(torch::relu(fc1(x.flatten(1))));
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

// Trains `max_steps` steps (all of the epoch when <= 0); returns (seconds, images).
std::pair<double, int64_t> train_steps(Net& net, torch::optim::SGD& sgd, const std::string& dir, int64_t max_steps) {
  auto dataset = torch::data::datasets::MNIST(dir, torch::data::datasets::MNIST::Mode::kTrain)
                     .map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(64));
  net->train();
  // As strata-train: loss and accuracy summed as tensors every step, read once at the end.
  auto loss_sum = torch::zeros({}), correct = torch::zeros({}, torch::kLong);
  int64_t steps = 0, images = 0;
  const auto start = Clock::now();
  for (auto& batch : *loader) {
    const auto logits = net->forward(batch.data);
    const auto loss = torch::nn::functional::cross_entropy(logits, batch.target);
    sgd.zero_grad();
    loss.backward();
    sgd.step();
    {
      torch::NoGradGuard no_grad;
      loss_sum.add_(loss.detach(), batch.target.size(0));
      correct.add_(logits.detach().argmax(1).eq(batch.target).sum());
    }
    images += batch.target.size(0);
    if (++steps == max_steps) break;
  }
  (void)loss_sum.item<float>();
  return {std::chrono::duration<double>(Clock::now() - start).count(), images};
}

Metrics epoch(const Options& o) {
  Metrics m;
  torch::manual_seed(0);
  Net net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  train_steps(net, sgd, o.data_dir, 10);  // warm-up, as strata-bench's (10 steps)
  const auto [seconds, images] = train_steps(net, sgd, o.data_dir, o.quick ? 50 : 0);
  put(m, "epoch_cpu_seconds", seconds, "s", "lower");
  put(m, "epoch_cpu_images_per_s", static_cast<double>(images) / seconds, "img/s", "higher");
  return m;
}

// As strata-bench's contention workload: the D2L exercise (norm read after each) and an epoch, idle and then with
// one busy process per core (tools/bench/busy_cores.h, shared with it).
Metrics contention(const Options& o) {
  Metrics m;
  const int64_t steps = o.quick ? 25 : 100;  // 1600 or 6400 images, as strata-bench
  const auto a = torch::randn({100, 100}) * 0.1, b = torch::randn({100, 100}) * 0.1;
  const auto epoch_seconds = [&] {
    torch::manual_seed(0);
    Net net;
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    train_steps(net, sgd, o.data_dir, 10);  // warm-up, as strata-bench's (10 steps)
    return train_steps(net, sgd, o.data_dir, steps).first;
  };
  const double d2l_idle = d2l_seconds(a, b, true), epoch_idle = epoch_seconds();
  double d2l_busy = 0, epoch_busy = 0;
  {
    const busy_cores::BusyProcesses load(busy_cores::cores());
    d2l_busy = d2l_seconds(a, b, true);
    epoch_busy = epoch_seconds();
  }
  put(m, "contention_d2l_idle_ms", d2l_idle * 1e3, "ms", "lower");
  put(m, "contention_d2l_busy_ms", d2l_busy * 1e3, "ms", "lower");
  put(m, "contention_d2l_slowdown", d2l_busy / d2l_idle, "x", "lower");
  put(m, "contention_epoch_idle_s", epoch_idle, "s", "lower");
  put(m, "contention_epoch_busy_s", epoch_busy, "s", "lower");
  put(m, "contention_epoch_slowdown", epoch_busy / epoch_idle, "x", "lower");
  return m;
}

Metrics overhead(const Options& o) {
  Metrics m;
  const int calls = o.quick ? 20000 : 200000, repeats = o.quick ? 5 : 11;
  const auto a = torch::full({16}, 1.5f), b = torch::full({16}, 2.0f);
  auto c = torch::full({16}, 1.5f);
  put(m, "tiny_add_cpu_ns", ns_per_call([&] { (void)torch::add(a, b); }, calls, repeats), "ns/op", "lower");
  put(m, "tiny_add_inplace_cpu_ns", ns_per_call([&] { c.add_(b); }, calls, repeats), "ns/op", "lower");
  const size_t sizes[] = {512, 4096, 65536, 1 << 20, 16 << 20};
  size_t next = 0;
  c10::Allocator* cpu = c10::GetCPUAllocator();
  put(m, "allocator_cpu_ns", ns_per_call([&] { (void)cpu->allocate(sizes[next++ % 5]); }, calls, repeats),
      "ns/alloc", "lower");
  put(m, "empty_cpu_ns",
      ns_per_call([&] { (void)torch::empty({static_cast<int64_t>(sizes[next++ % 5] / 4)}); }, calls, repeats),
      "ns/op", "lower");
  return m;
}

double run_seconds(const std::string& path) {
  char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
  const auto start = Clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, path.c_str(), nullptr, nullptr, argv, environ) != 0) throw std::runtime_error("cannot start " + path);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error(path + " failed");
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Metrics startup(const Options& o) {
  Metrics m;
  if (!o.first_op.empty()) {
    put(m, "startup_first_op_ms", median_seconds([&] { run_seconds(o.first_op); }, o.quick ? 3 : 9) * 1e3, "ms",
        "lower");
  }
  return m;  // compile_train_program_s is added by the script, which does the compiling
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.data_dir = "/usr/share/datasets/fashion-mnist";
  std::set<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--only" && i + 1 < argc) {
      std::stringstream list(argv[++i]);
      for (std::string name; std::getline(list, name, ',');) only.insert(name);
    } else if (arg == "--data" && i + 1 < argc) {
      o.data_dir = argv[++i];
    } else if (arg == "--first-op" && i + 1 < argc) {
      o.first_op = argv[++i];
    } else {
      std::fprintf(stderr, "torch_bench: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  const std::vector<std::pair<std::string, std::function<Metrics(const Options&)>>> all = {
      {"matmul", matmul}, {"d2l", d2l},         {"vector_add", vector_add}, {"conv", conv},
      {"epoch", epoch},   {"overhead", overhead}, {"startup", startup},       {"contention", contention}};
  nlohmann::json out{{"tool", "libtorch"},
                     {"version", TORCH_VERSION},
                     {"threads", at::get_num_threads()},
                     {"parallel_info", at::get_parallel_info()},
                     {"environment", environment()},
                     {"workloads", nlohmann::json::object()}};
  for (const auto& [name, run] : all) {
    if (!only.empty() && only.count(name) == 0) continue;
    std::fprintf(stderr, "torch_bench: running %s ...\n", name.c_str());
    out["workloads"][name] = {{"metrics", run(o)}};
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}
