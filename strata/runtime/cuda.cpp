#include "strata/runtime/cuda.h"

#include "strata/runtime/registry.h"

namespace strata::cuda {

bool is_available() { return device_count() > 0; }

int device_count() { return strata::device_count(DeviceType::CUDA); }

std::string unavailable_reason() {
  std::string reason = strata::unavailable_reason(DeviceType::CUDA);
  if (reason.empty() && device_count() == 0) reason = "the CUDA driver reports no GPU";
  return reason;
}

std::string device_name(int index) { return backend(Device(DeviceType::CUDA, index)).properties(index).name; }

int current_device() { return backend(DeviceType::CUDA).current_device(); }

void set_device(int index) { backend(Device(DeviceType::CUDA, index)).set_current_device(index); }

DeviceGuard::DeviceGuard(int index) : previous_(current_device()) { set_device(index); }

DeviceGuard::~DeviceGuard() { backend(DeviceType::CUDA).set_current_device(previous_); }

}  // namespace strata::cuda
