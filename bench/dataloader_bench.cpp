// Batches per second of the Fashion-MNIST training loader (batch 64, shuffled), with and without background
// prefetch, and with a consumer that does nothing or spends a fixed time per batch (standing in for a training
// step). Without prefetch the consumer pays for preparing each batch; with it, preparation overlaps the step.
#include <benchmark/benchmark.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "strata/data/dataloader.h"
#include "strata/data/fashion_mnist.h"
#include "strata/runtime/cuda.h"

namespace {

using strata::data::DataLoader;
using strata::data::DataLoaderOptions;

std::shared_ptr<const strata::data::FashionMnist> train_set() {
  static const std::shared_ptr<const strata::data::FashionMnist> ds = []() {
    const std::filesystem::path dir(strata::data::kFashionMnistDir);
    if (!std::filesystem::exists(dir / "train-images-idx3-ubyte.gz")) {
      return std::shared_ptr<const strata::data::FashionMnist>();
    }
    return std::make_shared<const strata::data::FashionMnist>(dir, strata::data::Split::Train);
  }();
  return ds;
}

void spin_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

enum class Extra { None, Augment };

void BM_FashionMnistLoader(benchmark::State& state, int64_t prefetch, int step_us, Extra extra, const char* device) {
  const auto ds = train_set();
  if (!ds) {
    state.SkipWithError("Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)");
    return;
  }
  const strata::Device dev(device);
  if (dev.is_cuda() && !strata::cuda::is_available()) {
    state.SkipWithError("CUDA is unavailable");
    return;
  }
  DataLoaderOptions options{.batch_size = 64, .shuffle = true, .seed = 1, .prefetch = prefetch};
  options.device = dev;
  options.pin_memory = dev.is_cuda();
  options.scale_bytes = true;
  if (extra == Extra::Augment) {
    options.transform =
        strata::data::Compose({strata::data::RandomCrop(28, 4, 1), strata::data::RandomHorizontalFlip(0.5, 1),
                               strata::data::Normalize({0.2860f}, {0.3530f})});
  }
  DataLoader loader(ds, options);
  auto it = loader.begin();
  for (auto _ : state) {
    if (it == loader.end()) it = loader.begin();
    benchmark::DoNotOptimize(it->data.data_ptr());
    if (step_us > 0) spin_for(std::chrono::microseconds(step_us));
    ++it;
  }
  const auto batches = static_cast<double>(state.iterations());
  state.counters["batches/s"] = benchmark::Counter(batches, benchmark::Counter::kIsRate);
  state.counters["images/s"] = benchmark::Counter(batches * 64, benchmark::Counter::kIsRate);
  state.counters["wait_us/batch"] = loader.stats().wait_seconds * 1e6 / static_cast<double>(loader.stats().batches);
}

#define STRATA_LOADER_BENCH(name, prefetch, step_us, extra, device)                \
  BENCHMARK_CAPTURE(BM_FashionMnistLoader, name, prefetch, step_us, extra, device) \
      ->UseRealTime()                                                              \
      ->Unit(benchmark::kMicrosecond)

STRATA_LOADER_BENCH(no_prefetch, 0, 0, Extra::None, "cpu");
STRATA_LOADER_BENCH(prefetch2, 2, 0, Extra::None, "cpu");
STRATA_LOADER_BENCH(no_prefetch_step100us, 0, 100, Extra::None, "cpu");
STRATA_LOADER_BENCH(prefetch2_step100us, 2, 100, Extra::None, "cpu");
STRATA_LOADER_BENCH(augment_no_prefetch_step100us, 0, 100, Extra::Augment, "cpu");
STRATA_LOADER_BENCH(augment_prefetch2_step100us, 2, 100, Extra::Augment, "cpu");
STRATA_LOADER_BENCH(cuda_no_prefetch, 0, 0, Extra::None, "cuda");
STRATA_LOADER_BENCH(cuda_prefetch2, 2, 0, Extra::None, "cuda");

}  // namespace
