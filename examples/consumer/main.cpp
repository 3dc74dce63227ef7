// Uses Strata through the installed package only (<strata/strata.h>, strata::strata); tests/install_consumer.sh
// builds and runs it. Exits non-zero when a figure is not what it should be.
#include <strata/strata.h>

#include <cstdio>
#include <cstring>

int main() {
  using namespace strata;
  std::printf("device cpu: %s\n", backend(kCPU).properties(0).name.c_str());
  for (int i = 0; i < cuda::device_count(); ++i) std::printf("device cuda:%d: %s\n", i, cuda::device_name(i).c_str());
  if (!cuda::is_available()) std::printf("cuda unavailable: %s\n", cuda::unavailable_reason().c_str());

  constexpr std::size_t kBytes = 1 << 20;
  const int64_t before = memory_stats(kCPU).allocated_bytes.current;
  int64_t during = 0;
  {
    const DataPtr block = allocate(kCPU, kBytes);
    std::memset(block.get(), 0xab, kBytes);
    during = memory_stats(kCPU).allocated_bytes.current;
  }
  const int64_t after = memory_stats(kCPU).allocated_bytes.current;
  std::printf("allocated %zu bytes on cpu: strata held %lld bytes, then %lld after the free\n", kBytes,
              static_cast<long long>(during), static_cast<long long>(after));

  const Tensor a = arange(0, 6, 1, DType::F32).reshape({2, 3});
  const float total = sum(a * a).item<float>();
  std::printf("sum of squares: %g\n", total);
  const bool ok = during - before >= static_cast<int64_t>(kBytes) && after == before && total == 55.0f;
  return ok ? 0 : 1;
}
