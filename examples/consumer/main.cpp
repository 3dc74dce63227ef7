#include <cstdio>

#include <strata/strata.h>

int main() {
  using namespace strata;
  const Tensor a = arange(0, 6, 1, DType::F32).reshape({2, 3});
  const float total = sum(a * a).item<float>();
  std::printf("devices: cpu%s\n", cuda::is_available() ? " cuda" : "");
  std::printf("sum of squares: %g\n", total);
  std::printf("cpu bytes allocated by strata: %lld\n", static_cast<long long>(memory_stats(kCPU).allocated_bytes.current));
  return total == 55.0f ? 0 : 1;
}
