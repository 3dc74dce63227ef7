// The GPU chapter of Dive into Deep Learning, in Strata: where tensors live, copies that are explicit, and two
// devices at once.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>

#include <strata/strata.h>

using namespace strata;

namespace {

// d2l, "Automatic Parallelism": the same work on two devices, one after the other and then at once, each device
// driven by its own host thread. Two GPUs when there are, otherwise two virtual CPU devices (STRATA_CPU_DEVICES=2),
// which share the host's cores fairly (the concurrent run is then no faster: it shows the code, not a speed-up).
void two_devices_at_once() {
  std::vector<Device> two;
  if (cuda::device_count() >= 2) {
    two = {Device("cuda:0"), Device("cuda:1")};
  } else if (device_count(DeviceType::CPU) >= 2) {
    two = {Device("cpu:0"), Device("cpu:1")};
  } else {
    std::cout << "Two devices at once: skipped, there is one device (STRATA_CPU_DEVICES=2 makes two on the CPU)\n";
    return;
  }
  const auto run = [](Device device) {  // d2l: run(x) = [x.mm(x) for _ in range(50)]
    const Tensor x = rand({200, 200}, device);
    Tensor y = x;
    for (int i = 0; i < 50; ++i) y = matmul(x, y) / 200.0;
    synchronize(device);
    return y;
  };
  const auto seconds = [](const auto& fn) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (Device d : two) run(d);  // warm-up
  const double one_after_other = seconds([&] {
    for (Device d : two) run(d);
  });
  const double at_once = seconds([&] {
    std::thread second([&] { run(two[1]); });
    run(two[0]);
    second.join();
  });
  std::printf("Two devices (%s, %s): one after the other %.4f s, at once %.4f s\n", two[0].str().c_str(),
              two[1].str().c_str(), one_after_other, at_once);
}

}  // namespace

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
  two_devices_at_once();

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
