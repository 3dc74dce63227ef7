#include "strata/runtime/kernel_assert.h"

#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "strata/core/error.h"
#include "strata/runtime/environment.h"
#include "strata/runtime/registry.h"

namespace strata {

namespace {

// Note [Assert sites and slots without a lock]
// Every launch of an asserting kernel asks for its site's id and its stream's slot, so once known both are found
// without a lock or an allocation.
// Sites: the registry interns each distinct (kernel, op, message, file, line) by its text, under the mutex, and then
// publishes the answer in a fixed open-addressed table keyed by the *addresses* of the four strings and the line,
// which launches probe lock-free. No function-local static at the `asserts()` call can hold the id, since the
// `kernel` and `op` that reach one call vary with the op that ran it; what stays fixed per (kernel, op, call site)
// are the addresses, as the names are string literals. But `kernel` and `op` are plain `const char*` and may be
// runtime strings whose memory is later reused for another name, so a hit is confirmed by comparing the text with
// the site's own copy (no allocation), and a mismatch takes the slow path. Entries are never removed or replaced,
// and the table stops growing when three quarters full: names that are new at every call take the slow path, in
// bounded memory.
// Slots: a small per-thread cache in front of the registry's map (see CachedSlot).

struct AssertSite {
  std::string kernel, op, message, file;
  unsigned line;
  int id;
};

/// What a launch passed, by address, and the site whose text confirms it.
struct SiteAddresses {
  const char* kernel;
  const char* op;
  const char* message;
  const char* file;
  unsigned line;
  const AssertSite* site;

  bool same_addresses(const SiteAddresses& other) const {
    return kernel == other.kernel && op == other.op && message == other.message && file == other.file &&
           line == other.line;
  }
};

class SiteTable {
 public:
  /// The id cached for these addresses, when their text is still the site's; -1 otherwise.
  int find(const SiteAddresses& key) const {
    for (std::size_t i = hash(key);; ++i) {
      const SiteAddresses* entry = entries_[i % kCapacity].load(std::memory_order_acquire);
      if (entry == nullptr) return -1;  // the table is never full, so every probe ends
      if (!entry->same_addresses(key)) continue;
      const AssertSite& site = *entry->site;
      const bool same_text =
          site.kernel == key.kernel && site.op == key.op && site.message == key.message && site.file == key.file;
      return same_text ? site.id : -1;
    }
  }

  /// Caches `key`; called under the registry's mutex, so there is one writer at a time.
  void insert(const SiteAddresses& key) {
    if (used_ >= kCapacity * 3 / 4) return;
    std::size_t i = hash(key);
    for (;; ++i) {
      const SiteAddresses* entry = entries_[i % kCapacity].load(std::memory_order_relaxed);
      if (entry == nullptr) break;
      // Addresses whose text changed keep their first entry: replacing it could free what a reader holds.
      if (entry->same_addresses(key)) return;
    }
    entries_[i % kCapacity].store(&owned_.emplace_back(key), std::memory_order_release);
    ++used_;
  }

 private:
  static constexpr std::size_t kCapacity = 512;

  static std::size_t hash(const SiteAddresses& key) {
    std::size_t h = key.line;
    for (const void* p : {static_cast<const void*>(key.kernel), static_cast<const void*>(key.op),
                          static_cast<const void*>(key.message), static_cast<const void*>(key.file)}) {
      h ^= reinterpret_cast<std::uintptr_t>(p) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    }
    return h;
  }

  std::array<std::atomic<const SiteAddresses*>, kCapacity> entries_{};
  std::deque<SiteAddresses> owned_;  // a deque never moves its elements, which readers point to
  std::size_t used_ = 0;
};

struct AssertRegistry {
  std::mutex mutex;
  std::deque<AssertSite> sites;  // by id; a deque, as the table's entries point to its elements
  std::map<std::tuple<std::string, std::string, std::string, std::string, unsigned>, const AssertSite*> ids;
  SiteTable cached_sites;
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

bool same_device(const std::tuple<int, int, NativeStream>& key, Device device) {
  return std::get<0>(key) == static_cast<int>(device.type()) && std::get<1>(key) == device.index();
}

// Slots are never freed, so a cached pointer never dangles. A stream destroyed and another created at the same
// address share a slot: a failure the first left unchecked is reported at the second's synchronisation, naming its
// own kernel, op and launch site -- late rather than lost, and the report does not depend on which stream read it.
struct CachedSlot {
  Device device;
  NativeStream stream = nullptr;
  DeviceAssertSlot* slot = nullptr;
};
constexpr std::size_t kCachedSlots = 4;  // a thread uses a few streams at a time
thread_local std::array<CachedSlot, kCachedSlots> cached_slots{};
thread_local std::size_t next_cached_slot = 0;

DeviceAssertSlot* cached_slot(Device device, NativeStream stream) {
  for (const CachedSlot& c : cached_slots) {
    if (c.slot != nullptr && c.stream == stream && c.device == device) return c.slot;
  }
  return nullptr;
}

void cache_slot(Device device, NativeStream stream, DeviceAssertSlot* slot) {
  cached_slots[next_cached_slot++ % kCachedSlots] = {device, stream, slot};
}

/// The failure recorded in `slot`, which is then free for the next one; none when the slot holds no complete report.
/// The slot is claimed (recorded -> writing) before it is read, so two threads checking one stream report it once,
/// and kernels still running on the stream leave it alone meanwhile, as they would a failure being written.
std::optional<DeviceAssertSlot> take_failure(DeviceAssertSlot* slot) {
  std::atomic_ref<unsigned int> state(slot->failed);
  unsigned int expected = kAssertSlotRecorded;
  if (!state.compare_exchange_strong(expected, kAssertSlotWriting, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
    return std::nullopt;
  }
  const DeviceAssertSlot seen{kAssertSlotRecorded, slot->site, slot->index, slot->value, slot->bound};
  slot->site = 0;
  slot->index = 0;
  slot->value = 0;
  slot->bound = 0;
  state.store(kAssertSlotFree, std::memory_order_release);
  return seen;
}

/// Called with the registry's mutex held, which `lock` releases before throwing.
[[noreturn]] void throw_failure(AssertRegistry& r, std::unique_lock<std::mutex>& lock, Device device,
                                const DeviceAssertSlot& seen) {
  const AssertSite& site = r.sites.at(static_cast<std::size_t>(seen.site));
  std::string message = fmt::format(
      "device-side assert in kernel '{}' of op '{}' on {}: {} (element {}, value {}, valid range [0, {})); "
      "launched from {}:{}{}",
      site.kernel, site.op, device, site.message, seen.index, seen.value, seen.bound, site.file, site.line,
      // On the CPU the failure is reported by the op that launched the kernel already: nothing to suggest.
      launch_blocking() || device.is_cpu() ? "" : "; set STRATA_LAUNCH_BLOCKING=1 to report it at the launch itself");
  lock.unlock();
  throw DeviceAssertError(message);
}

}  // namespace

int register_assert_site(const char* kernel, const char* op, const char* message, std::source_location where) {
  static constexpr char kNoOp[] = "";  // one address for every launch without an op
  const SiteAddresses addresses{
      kernel, op != nullptr ? op : kNoOp, message, where.file_name(), static_cast<unsigned>(where.line()), nullptr};
  auto& r = assert_registry();
  if (const int id = r.cached_sites.find(addresses); id >= 0) return id;
  std::lock_guard lock(r.mutex);
  auto key = std::make_tuple(std::string(addresses.kernel), std::string(addresses.op), std::string(message),
                             std::string(addresses.file), addresses.line);
  const AssertSite* site = nullptr;
  if (auto it = r.ids.find(key); it != r.ids.end()) {
    site = it->second;
  } else {
    site = &r.sites.emplace_back(AssertSite{std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key),
                                            addresses.line, static_cast<int>(r.sites.size())});
    r.ids.emplace(std::move(key), site);
  }
  SiteAddresses cached = addresses;
  cached.site = site;
  r.cached_sites.insert(cached);
  return site->id;
}

DeviceAssertSlot* assert_slot(Device device, NativeStream stream) {
  if (DeviceAssertSlot* slot = cached_slot(device, stream)) return slot;
  auto& r = assert_registry();
  std::lock_guard lock(r.mutex);
  auto& slot = r.slots[slot_key(device, stream)];
  if (slot == nullptr) {
    // Pinned (and, on CUDA, mapped) host memory: the GPU writes it, the host reads it after a sync.
    slot = static_cast<DeviceAssertSlot*>(backend(device).allocate_pinned(sizeof(DeviceAssertSlot)));
    if (slot == nullptr) {
      r.slots.erase(slot_key(device, stream));
      STRATA_THROW(OutOfMemoryError,
                   "launching a kernel with device-side asserts on {}: no pinned host memory left for its error slot "
                   "({} bytes); pinned memory is limited by RAM and by the locked-memory limit (ulimit -l)",
                   device, sizeof(DeviceAssertSlot));
    }
    std::memset(slot, 0, sizeof(DeviceAssertSlot));
  }
  cache_slot(device, stream, slot);
  return slot;
}

void check_stream_asserts(Device device, NativeStream stream) {
  auto& r = assert_registry();
  DeviceAssertSlot* slot = cached_slot(device, stream);
  std::unique_lock lock(r.mutex, std::defer_lock);
  if (slot == nullptr) {
    // A stream no asserting kernel ran on has no slot, and gets none: the check must not allocate.
    lock.lock();
    auto it = r.slots.find(slot_key(device, stream));
    if (it == r.slots.end()) return;
    slot = it->second;
  }
  const std::optional<DeviceAssertSlot> seen = take_failure(slot);
  if (!seen) return;
  if (!lock.owns_lock()) lock.lock();
  throw_failure(r, lock, device, *seen);
}

void check_device_asserts(Device device) {
  auto& r = assert_registry();
  std::unique_lock lock(r.mutex);
  for (auto& [key, slot] : r.slots) {
    if (!same_device(key, device)) continue;
    if (const std::optional<DeviceAssertSlot> seen = take_failure(slot)) throw_failure(r, lock, device, *seen);
  }
}

bool launch_blocking() {
  // Read once; a bad value throws at every call until fixed (Note [Strata's environment variables]).
  static const bool blocking = [] {
    const auto value = environment_value("STRATA_LAUNCH_BLOCKING");
    return value && environment_switch("STRATA_LAUNCH_BLOCKING", *value);
  }();
  return blocking;
}

}  // namespace strata
