// The GPU chapter of Dive into Deep Learning, in Strata: where tensors live, and copies that are explicit.
#include <cstdio>
#include <iostream>

#include <strata/strata.h>

using namespace strata;

int main() try {
  // Which devices are there?  (d2l: try_gpu)
  const Device gpu = cuda::is_available() ? Device("cuda:0") : kCPU;
  std::cout << "CUDA devices: " << cuda::device_count() << "; using " << gpu << "\n";
  if (!cuda::is_available()) std::cout << "  (" << cuda::unavailable_reason() << ")\n";

  // Tensors are created on a device.  (d2l: X = torch.ones(2, 3, device=try_gpu()))
  const Tensor x = ones({2, 3}, gpu);
  std::cout << "X =\n" << x << "\n";
  const Tensor y = rand({2, 3}, gpu);

  // Copies are explicit: copy_to always allocates, to() returns the same tensor when it is already there.
  const Tensor z = x.copy_to(gpu);
  std::cout << "Z shares storage with X: " << (z.shares_storage(x) ? "yes" : "no") << "\n";
  std::cout << "Z.to(" << gpu << ") is Z itself: " << (z.to(gpu).shares_storage(z) ? "yes" : "no") << "\n";
  std::cout << "Y + Z =\n" << (y + z) << "\n";

  // Mixing devices is an error, never a hidden copy.
  if (gpu.is_cuda()) {
    try {
      const Tensor on_cpu = ones({2, 3});
      std::cout << (x + on_cpu) << "\n";
    } catch (const DeviceMismatchError& e) {
      std::cout << "DeviceMismatchError: " << e.what() << "\n";
    }
  }
  const auto counters = transfer_counters();
  std::printf("host->device copies: %lld, device->host copies: %lld, synchronisations: %lld\n",
              static_cast<long long>(counters.host_to_device_copies),
              static_cast<long long>(counters.device_to_host_copies),
              static_cast<long long>(counters.synchronizations));
  return 0;
} catch (const strata::Error& e) {  // a bad STRATA_MEMORY_LIMIT, an out-of-memory error, ...
  std::fprintf(stderr, "d2l_gpu: %s\n", e.what());
  return 1;
}
