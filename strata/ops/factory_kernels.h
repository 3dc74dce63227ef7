#pragma once

#include <cstdint>

#include "strata/ops/kernel_table.h"

namespace strata::ops {

// Kernels that fill a new, contiguous tensor (tensor/ranges.cpp, tensor/random.cpp). The tensors layer checks the
// arguments and works out the element count; the kernels only write.

/// out[i] = start + i * step, in i64 for integral outputs and f64 for floating ones.
using ArangeFn = void(const OpCall&, const TensorView& out, const Scalar& start, const Scalar& step);
/// out.numel() values evenly spaced from start to end inclusive.
using LinspaceFn = void(const OpCall&, const TensorView& out, double start, double end);
/// out (n x m) = the identity: ones on the main diagonal, zeros elsewhere.
using EyeFn = void(const OpCall&, const TensorView& out);

// Note [Random numbers on every device]
// Random values come from Philox4x32-10, a counter-based generator (backends/portable/philox.h): block b of the
// stream keyed by a seed is four 32-bit words computed from (seed, b) alone. A device's generator state is
// (seed, offset), the offset counting the blocks drawn so far. Value i of a draw takes its bits from block
// offset + i / per_block (lane i % per_block), where per_block is 4 for values made from 32 bits and 2 for values
// made from 64 bits (f64, and integers), and the draw advances the offset by ceil(n / per_block). So a value
// depends only on (seed, offset, i), never on threads or launch shapes, and since the conversions to floats
// (including Box-Muller's log, sqrt and sin/cos) are written with correctly rounded operations only, the same
// seed gives bit-identical tensors on the CPU and on a GPU.

enum class Distribution : std::uint8_t {
  Uniform,   // [0, 1)
  Normal,    // mean 0, standard deviation 1 (Box-Muller)
  Integers,  // [low, high)
};

/// What a random fill draws and from where.
struct RandomSpec {
  Distribution distribution = Distribution::Uniform;
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;  // in Philox blocks
  int64_t low = 0;
  int64_t high = 0;
};

/// Values of one draw taken from one Philox block (see Note [Random numbers on every device]).
inline constexpr int64_t random_values_per_block(Distribution distribution, DType dtype) {
  return distribution == Distribution::Integers || dtype == DType::F64 ? 2 : 4;
}

/// Fills contiguous `out` with values of spec.distribution.
using RandomFn = void(const OpCall&, const TensorView& out, const RandomSpec& spec);

/// Philox blocks a multinomial draw takes per row: one f64 uniform (half a block) per sample with replacement, per
/// category without (Note [Sampling from rows of weights]).
inline constexpr int64_t multinomial_blocks_per_row(int64_t categories, int64_t num_samples, bool replacement) {
  return ((replacement ? num_samples : categories) + 1) / 2;
}
/// out ([rows, num_samples], i64) = category indices drawn from each row of `weights` ([rows, categories],
/// contiguous, floating, validated: finite, non-negative, a positive sum), from Philox blocks
/// offset + row * multinomial_blocks_per_row(...) onwards of `seed`'s stream ("multinomial").
using MultinomialFn = void(const OpCall&, const TensorView& out, const TensorView& weights, bool replacement,
                           std::uint64_t seed, std::uint64_t offset);

}  // namespace strata::ops
