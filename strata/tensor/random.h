#pragma once

#include <cstdint>
#include <mutex>

#include "strata/core/device.h"

namespace strata {

/// Where a generator stands: its seed and how many Philox blocks it has handed out (see Note [Random numbers on
/// every device] in ops/factory_kernels.h).
struct GeneratorState {
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
};

/// The random state of one device. Thread-safe; each draw reserves its own range of Philox blocks.
class Generator {
 public:
  /// PyTorch's default seed, so that a program that never seeds is still reproducible.
  static constexpr std::uint64_t kDefaultSeed = 67280421310721ull;

  explicit Generator(std::uint64_t seed = kDefaultSeed) : state_{seed, 0} {}
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  std::uint64_t seed() const;
  /// Restarts the stream of `seed` from its beginning.
  void manual_seed(std::uint64_t seed);
  /// The state to save and later restore (e.g. with a checkpoint).
  GeneratorState state() const;
  void set_state(GeneratorState state);
  /// Hands out `blocks` Philox blocks: returns the state to draw them from and advances past them.
  GeneratorState reserve(std::uint64_t blocks);

 private:
  mutable std::mutex mutex_;
  GeneratorState state_;
};

/// The generator that rand/randn/randint use for `device` ("cuda" means the current GPU).
Generator& default_generator(Device device);

}  // namespace strata
