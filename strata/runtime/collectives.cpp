#include "strata/runtime/collectives.h"

#include <map>
#include <mutex>

namespace strata {

namespace {

struct Libraries {
  std::mutex mutex;
  std::map<DeviceType, std::shared_ptr<CollectiveLibrary>> by_type;
};

Libraries& libraries() {
  static Libraries* const l = new Libraries();  // plugins may register from static initialisers and exit handlers
  return *l;
}

}  // namespace

void register_collective_library(DeviceType type, std::shared_ptr<CollectiveLibrary> library) {
  Libraries& l = libraries();
  std::lock_guard lock(l.mutex);
  l.by_type[type] = std::move(library);
}

std::shared_ptr<CollectiveLibrary> collective_library(DeviceType type) {
  Libraries& l = libraries();
  std::lock_guard lock(l.mutex);
  const auto it = l.by_type.find(type);
  return it == l.by_type.end() ? nullptr : it->second;
}

}  // namespace strata
