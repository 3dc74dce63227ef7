#include "strata/runtime/cuda.h"

#include <exception>

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

// A destructor that throws terminates the process, and a sticky error (a kernel's illegal address) makes every
// cudaSetDevice fail. So, as the plugin's RuntimeDeviceGuard, restoring swallows the failure; the backend has already
// cleared it from the runtime's last-error slot, and the sticky error itself stays for the next checked call.
DeviceGuard::~DeviceGuard() {
  try {
    backend(DeviceType::CUDA).set_current_device(previous_);
  } catch (const std::exception&) {
  }
}

}  // namespace strata::cuda
