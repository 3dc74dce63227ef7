// Adding two vectors of 10 million floats on the CPU and, when present, the GPU (the Numba tutorial's experiment).
#include <chrono>
#include <cstdio>

#include <strata/strata.h>

using namespace strata;

namespace {

void run(Device device) {
  constexpr int64_t n = 10'000'000;
  const Tensor a = ones({n}, device), b = full({n}, 2.0f, device);
  Tensor c = empty({n}, device);
  c.copy_(a + b);  // warm-up: the allocator caches the result's memory
  synchronize(device);
  constexpr int repeats = 20;
  Event start(device), end(device);
  start.record();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i) c = a + b;
  end.record();
  end.synchronize();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / repeats;
  const double gbs = 3.0 * n * sizeof(float) / seconds / 1e9;
  std::printf("%-7s c = a + b on %lld floats: %8.3f ms  (%.1f GB/s), c[0] = %.1f\n", device.str().c_str(),
              static_cast<long long>(n), seconds * 1e3, gbs, c[0].item<float>());
}

}  // namespace

int main() try {
  run(kCPU);
  if (cuda::is_available()) run(Device("cuda:0"));
  else std::printf("cuda    skipped: %s\n", cuda::unavailable_reason().c_str());
  return 0;
} catch (const strata::Error& e) {  // a bad STRATA_MEMORY_LIMIT, an out-of-memory error, ...
  std::fprintf(stderr, "vector_add: %s\n", e.what());
  return 1;
}
