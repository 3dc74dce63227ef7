#pragma once

#include <string>

namespace strata::cuda {

/// True when the CUDA plugin loaded and at least one GPU is usable.
bool is_available();
/// Number of usable GPUs (0 when CUDA is unavailable).
int device_count();
/// Why CUDA is unavailable, in one line; empty when it is available.
std::string unavailable_reason();
/// The GPU's name, e.g. "NVIDIA H100 80GB HBM3"; throws DeviceUnavailableError for an absent index.
std::string device_name(int index);
int current_device();
void set_device(int index);

/// Makes `index` the current CUDA device until the guard goes out of scope. Restoring the previous device never
/// throws: after a sticky CUDA error it may fail, and the next checked call reports that error.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

}  // namespace strata::cuda
