#include "strata/ops/kernel_table.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "strata/ops/op_support.h"
#include "strata/runtime/registry.h"

namespace strata::ops {

namespace detail {

std::atomic<bool> counting_kernel_calls{false};

namespace {

struct Table {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<KernelEntry>, std::less<>> entries;
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

KernelEntry& kernel_entry(std::string_view op, const std::type_info& signature) {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  auto it = t.entries.find(op);
  if (it == t.entries.end()) {
    it = t.entries.emplace(std::string(op), std::make_unique<KernelEntry>()).first;
    it->second->signature = &signature;
  }
  STRATA_CHECK(*it->second->signature == signature, Error,
               "internal error: op '{}' was registered with two different kernel signatures", op);
  return *it->second;
}

namespace {

// The entry of `op`, or InvalidArgumentError naming the op and listing the known ones.
const KernelEntry& known_entry(std::string_view op, const char* caller) {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  const auto it = t.entries.find(op);
  if (it != t.entries.end()) return *it->second;
  std::vector<std::string_view> names;
  for (const auto& [name, entry] : t.entries) names.push_back(name);
  STRATA_THROW(InvalidArgumentError, "{}: the op table has no op named '{}' (its ops are: {})", caller, op,
               fmt::join(names, ", "));
}

}  // namespace

}  // namespace detail

std::vector<KernelTableRow> kernel_table() {
  auto& t = detail::table();
  std::lock_guard lock(t.mutex);
  std::vector<KernelTableRow> rows;
  rows.reserve(t.entries.size());
  for (const auto& [name, entry] : t.entries) {
    KernelTableRow row;
    row.op = name;
    for (int i = 0; i < kDeviceTypeCount; ++i) {
      row.registered[i] = entry->fns[i].load(std::memory_order_acquire) != nullptr;
      const std::uint32_t bits = entry->dtypes[i].load();
      if (row.registered[i] && bits != detail::kDTypesUnlisted) row.dtypes[i] = DTypeSet::from_bits(bits);
      row.calls[i] = entry->calls[i].load(std::memory_order_relaxed);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

void set_kernel_call_counting(bool on) { detail::counting_kernel_calls.store(on); }

void reset_kernel_call_counts() {
  auto& t = detail::table();
  std::lock_guard lock(t.mutex);
  for (auto& [name, entry] : t.entries) {
    for (auto& count : entry->calls) count.store(0);
  }
}

}  // namespace strata::ops

namespace strata {

namespace {

// The entry of `op` once `type`'s backend is loaded, or nullptr when that backend is unavailable. A device type's
// column fills when its plugin loads, so asking about CUDA loads the plugin, as using it would, and before the name
// is looked up, since an op may be registered by the plugin alone. A plugin that declined (no device) may still
// have registered its kernels when it was loaded; they cannot run, so the answer is no.
const ops::detail::KernelEntry* entry_if_available(DeviceType type, std::string_view op) {
  const bool available = find_backend(type) != nullptr;
  const auto& entry = ops::detail::known_entry(op, "supports");  // an unknown name is an error either way
  return available ? &entry : nullptr;
}

// A kernel that lists no dtype at all is a stand-in that only says what is missing (the HIP plugin's GEMM).
bool has_kernel(const ops::detail::KernelEntry* entry, DeviceType type) {
  return entry != nullptr && entry->fns[static_cast<int>(type)].load(std::memory_order_acquire) != nullptr &&
         entry->dtypes[static_cast<int>(type)].load() != 0;
}

}  // namespace

bool supports(DeviceType type, std::string_view op) { return has_kernel(entry_if_available(type, op), type); }

bool supports(DeviceType type, std::string_view op, DType dtype) {
  const auto* entry = entry_if_available(type, op);
  if (!has_kernel(entry, type)) return false;
  const std::uint32_t bits = entry->dtypes[static_cast<int>(type)].load();
  // No dtype list: the kernel exists, and the table cannot say more (Note [What the op table knows about dtypes]).
  return bits == ops::detail::kDTypesUnlisted || ops::DTypeSet::from_bits(bits).contains(dtype);
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (auto& row : ops::kernel_table()) names.push_back(std::move(row.op));
  return names;
}

}  // namespace strata
