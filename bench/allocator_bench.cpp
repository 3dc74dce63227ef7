// Allocate/free cost of the caching allocator against the backend's raw memory, for the mix of sizes a training
// step asks for. Argument: 0 = allocate and free only, 1 = also touch every 4 KiB page (as a kernel writing the
// output would, which is where fresh pages from the OS cost most). CUDA runs only where a GPU is usable.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "strata/runtime/allocator.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/registry.h"

namespace strata {
namespace {

// One event of a step: allocate `bytes` into `slot`, or free what `slot` holds.
struct Event {
  bool allocate;
  std::size_t bytes;
  int slot;
};

constexpr int kSlots = 48;         // tensors alive at most at once (activations, gradients, temporaries)
constexpr int kAllocations = 400;  // per step

// A fixed, seeded step: sizes log-uniform within four bands from 512 B to 64 MiB (mostly small tensors, a few
// large activations), frees mostly of recent allocations (temporaries) and some of older ones, everything freed
// by the end of the step as when a training step finishes.
std::vector<Event> training_step() {
  std::mt19937_64 rng(20240611);
  const auto log_uniform = [&rng](double low, double high) {
    std::uniform_real_distribution<double> exponent(std::log2(low), std::log2(high));
    return static_cast<std::size_t>(std::exp2(exponent(rng))) / 4 * 4;
  };
  std::vector<Event> events;
  std::vector<int> live;
  std::vector<int> free_slots;
  for (int s = kSlots - 1; s >= 0; --s) free_slots.push_back(s);
  int allocations = 0;
  while (allocations < kAllocations || !live.empty()) {
    const bool grow = allocations < kAllocations && !free_slots.empty() && (live.empty() || rng() % 3 != 0);
    if (grow) {
      const unsigned band = rng() % 100;
      const std::size_t bytes = band < 60   ? log_uniform(512, 64 << 10)
                                : band < 85 ? log_uniform(64 << 10, 4 << 20)
                                : band < 97 ? log_uniform(4 << 20, 16 << 20)
                                            : log_uniform(16 << 20, 64 << 20);
      const int slot = free_slots.back();
      free_slots.pop_back();
      live.push_back(slot);
      events.push_back({true, bytes, slot});
      ++allocations;
    } else {
      const std::size_t pick = rng() % 10 < 7 ? live.size() - 1 : rng() % live.size();
      const int slot = live[pick];
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
      free_slots.push_back(slot);
      events.push_back({false, 0, slot});
    }
  }
  return events;
}

const std::vector<Event>& step_events() {
  static const std::vector<Event> events = training_step();
  return events;
}

// Bytes allocated over one step (not at once).
std::size_t step_bytes() {
  std::size_t total = 0;
  for (const Event& e : step_events()) total += e.bytes;
  return total;
}

void touch_pages(void* ptr, std::size_t bytes, bool on_host) {
  if (!on_host) return;
  auto* p = static_cast<volatile char*>(ptr);
  for (std::size_t i = 0; i < bytes; i += 4096) p[i] = 1;
}

void caching_step(CachingAllocator& caching, std::vector<DataPtr>& slots, bool touch, bool on_host) {
  for (const Event& e : step_events()) {
    if (e.allocate) {
      slots[e.slot] = caching.allocate(e.bytes);
      if (touch) touch_pages(slots[e.slot].get(), e.bytes, on_host);
    } else {
      slots[e.slot].reset();
    }
  }
}

// Measures the steady state of training: the first step, which fills the cache, runs before the clock starts.
void run_caching(benchmark::State& state, Device device) {
  const bool touch = state.range(0) != 0;
  CachingAllocator caching(make_backend_memory_resource(backend(device), device));
  std::vector<DataPtr> slots(kSlots);
  caching_step(caching, slots, touch, device.is_cpu());
  for (auto _ : state) caching_step(caching, slots, touch, device.is_cpu());
  state.SetItemsProcessed(state.iterations() * kAllocations);
  state.counters["reserved_MiB"] = static_cast<double>(caching.stats().reserved_bytes.peak) / (1 << 20);
  state.counters["step_MiB"] = static_cast<double>(step_bytes()) / (1 << 20);
}

void run_raw(benchmark::State& state, Device device) {
  const bool touch = state.range(0) != 0;
  Backend& b = backend(device);
  const int index = device.is_cpu() ? 0 : device.index();
  std::vector<std::pair<void*, std::size_t>> slots(kSlots, {nullptr, 0});
  for (auto _ : state) {
    for (const Event& e : step_events()) {
      auto& [ptr, bytes] = slots[e.slot];
      if (e.allocate) {
        ptr = b.raw_allocate(index, e.bytes);
        bytes = e.bytes;
        if (ptr == nullptr) {
          state.SkipWithError("the backend ran out of memory");
          return;
        }
        if (touch) touch_pages(ptr, bytes, device.is_cpu());
      } else {
        b.raw_free(index, ptr, bytes);
        ptr = nullptr;
      }
    }
  }
  state.SetItemsProcessed(state.iterations() * kAllocations);
}

bool skip_without_cuda(benchmark::State& state) {
  if (cuda::is_available()) return false;
  const std::string reason = "CUDA is unavailable: " + cuda::unavailable_reason();
  state.SkipWithError(reason.c_str());
  return true;
}

void BM_CachingAllocator_Cpu(benchmark::State& state) { run_caching(state, kCPU); }
void BM_RawBackend_Cpu(benchmark::State& state) { run_raw(state, kCPU); }

void BM_CachingAllocator_Cuda(benchmark::State& state) {
  if (!skip_without_cuda(state)) run_caching(state, Device(DeviceType::CUDA, 0));
}
void BM_RawBackend_Cuda(benchmark::State& state) {
  if (!skip_without_cuda(state)) run_raw(state, Device(DeviceType::CUDA, 0));
}

BENCHMARK(BM_CachingAllocator_Cpu)->ArgName("touch")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawBackend_Cpu)->ArgName("touch")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CachingAllocator_Cuda)->ArgName("touch")->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawBackend_Cuda)->ArgName("touch")->Arg(0)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace strata
