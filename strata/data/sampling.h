#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "strata/tensor/random.h"

namespace strata::data {

// Note [Reproducible shuffling]
// std::shuffle and std::uniform_int_distribution are implementation-defined, so the same seed would give different
// orders with libstdc++ and libc++. std::mt19937_64 and std::seed_seq are fully specified by the standard; on top of
// them we draw with a fixed multiply-shift and shuffle with a fixed Fisher-Yates, so an order depends only on the
// seed (and epoch), on every platform.

/// A number uniform in [0, n) (n > 0), drawn the same way on every platform (see Note [Reproducible shuffling]).
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(rng()) * n) >> 64);
}

/// A number uniform in [0, 1).
inline double uniform_unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// The generator for (seed, stream): different streams (epochs, transforms) of one seed are independent.
inline std::mt19937_64 make_generator(uint64_t seed, uint64_t stream = 0) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(stream),
                    static_cast<uint32_t>(stream >> 32)};
  return std::mt19937_64(seq);
}

/// 0..n-1 in an order that depends only on (seed, epoch).
inline std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::mt19937_64 rng = make_generator(seed, epoch);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

/// A seed for one shuffled order, drawn from `generator` (advancing it): as PyTorch's RandomSampler draws one per
/// epoch, so that an order follows manual_seed and the generator's state.
inline uint64_t draw_seed(Generator& generator) {
  const GeneratorState drawn = generator.reserve(1);
  return make_generator(drawn.seed, drawn.offset)();
}

}  // namespace strata::data
