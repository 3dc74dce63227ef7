#pragma once

#include <memory>

#include "strata/runtime/backend.h"

namespace strata {

/// The CPU backend: always present. Streams are eager (work runs when enqueued), events hold host timestamps.
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace strata
