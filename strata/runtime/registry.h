#pragma once

#include <memory>
#include <string>

#include "strata/runtime/backend.h"

namespace strata {

/// The backend for a device type, or nullptr when that type is unavailable (the first call for CUDA loads the
/// plugin; see Note [Loading a device's plugin]).
Backend* find_backend(DeviceType type);
/// The backend for a device type; throws DeviceUnavailableError with the reason when it is unavailable.
Backend& backend(DeviceType type);
/// The backend for a concrete device; also throws DeviceUnavailableError when the index does not exist.
Backend& backend(Device device);
/// Why a device type is unavailable; empty when it is available.
std::string unavailable_reason(DeviceType type);
/// Number of devices of a type (0 when unavailable; for the CPU, 1 unless virtual devices are on).
int device_count(DeviceType type);
/// Fills in the index of "cuda" with the current device; a device with an index (every CPU device) is returned as is.
Device resolve(Device device);
/// Throws DeviceUnavailableError naming the device and the reason when `device` cannot be used.
void check_device(Device device);

/// Installs a backend for a type, replacing any earlier one (used by plugins and by tests); the earlier one lives on
/// until exit, as another thread may still be using it (Note [Finding a backend without a lock]).
void register_backend(DeviceType type, std::unique_ptr<Backend> backend);

}  // namespace strata
