#include "strata/ops/kernel_table.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace strata::ops::detail {

KernelEntry& kernel_entry(std::string_view op, const std::type_info& signature) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<KernelEntry>, std::less<>> entries;
  std::lock_guard lock(mutex);
  auto it = entries.find(op);
  if (it == entries.end()) {
    it = entries.emplace(std::string(op), std::make_unique<KernelEntry>()).first;
    it->second->signature = &signature;
  }
  STRATA_CHECK(*it->second->signature == signature, Error,
               "internal error: op '{}' was registered with two different kernel signatures", op);
  return *it->second;
}

}  // namespace strata::ops::detail
