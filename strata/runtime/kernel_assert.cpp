#include "strata/runtime/kernel_assert.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "strata/core/error.h"
#include "strata/runtime/registry.h"

namespace strata {

namespace {

struct AssertSite {
  std::string kernel, op, message, file;
  unsigned line;
};

struct AssertRegistry {
  std::mutex mutex;
  std::vector<AssertSite> sites;
  std::map<std::tuple<std::string, std::string, std::string, std::string, unsigned>, int> ids;
  // Slot storage is owned here and never moves: kernels hold raw pointers into it.
  std::map<std::tuple<int, int, NativeStream>, DeviceAssertSlot*> slots;
};

AssertRegistry& assert_registry() {
  static auto* r = std::make_unique<AssertRegistry>().release();  // lives until exit: kernels may still point in
  return *r;
}

std::tuple<int, int, NativeStream> slot_key(Device device, NativeStream stream) {
  return {static_cast<int>(device.type()), device.index(), stream};
}

}  // namespace

int register_assert_site(const char* kernel, const char* op, const char* message, std::source_location where) {
  auto& r = assert_registry();
  std::lock_guard lock(r.mutex);
  auto key = std::make_tuple(std::string(kernel), std::string(op ? op : ""), std::string(message),
                             std::string(where.file_name()), static_cast<unsigned>(where.line()));
  if (auto it = r.ids.find(key); it != r.ids.end()) return it->second;
  const int id = static_cast<int>(r.sites.size());
  r.sites.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), std::get<4>(key)});
  r.ids.emplace(std::move(key), id);
  return id;
}

DeviceAssertSlot* assert_slot(Device device, NativeStream stream) {
  auto& r = assert_registry();
  std::lock_guard lock(r.mutex);
  auto& slot = r.slots[slot_key(device, stream)];
  if (slot == nullptr) {
    // Pinned (and, on CUDA, mapped) host memory: the GPU writes it, the host reads it after a sync.
    slot = static_cast<DeviceAssertSlot*>(backend(device).allocate_pinned(sizeof(DeviceAssertSlot)));
    std::memset(slot, 0, sizeof(DeviceAssertSlot));
  }
  return slot;
}

void check_device_asserts(Device device) {
  auto& r = assert_registry();
  std::unique_lock lock(r.mutex);
  for (auto& [key, slot] : r.slots) {
    if (std::get<0>(key) != static_cast<int>(device.type()) || std::get<1>(key) != device.index() || slot->failed == 0) {
      continue;
    }
    const DeviceAssertSlot seen = *slot;
    std::memset(slot, 0, sizeof(DeviceAssertSlot));
    const AssertSite& site = r.sites.at(static_cast<std::size_t>(seen.site));
    const std::string message = fmt::format(
        "device-side assert in kernel '{}' of op '{}' on {}: {} (element {}, value {}, valid range [0, {})); "
        "launched from {}:{}{}",
        site.kernel, site.op, device, site.message, seen.index, seen.value, seen.bound, site.file, site.line,
        launch_blocking() ? "" : "; set STRATA_LAUNCH_BLOCKING=1 to report it at the launch itself");
    lock.unlock();
    throw DeviceAssertError(message);
  }
}

bool launch_blocking() {
  // "false", "no" and "off" read as off too, as a user who wrote them meant; "1", "true", "yes", "on" or anything
  // else turns it on (a debugging switch errs on the side of reporting).
  static const bool blocking = [] {
    const char* env = std::getenv("STRATA_LAUNCH_BLOCKING");
    if (env == nullptr) return false;
    std::string value(env);
    for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return value != "" && value != "0" && value != "false" && value != "no" && value != "off";
  }();
  return blocking;
}

}  // namespace strata
