#pragma once

// Kernels that fill new tensors (arange, linspace, eye, random values), written once; instantiated by
// backends/cpu/factory_ops.cpp and backends/cuda/factory_ops.cu. Outputs are contiguous.

#include <type_traits>

#include "strata/backends/portable/launch_site.h"
#include "strata/backends/portable/philox.h"
#include "strata/kernels/elementwise.h"
#include "strata/ops/factory_kernels.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

template <typename T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
struct ArangeBody {
  T* out;
  int64_t start, step;  // integral outputs count exactly in i64
  double fstart, fstep;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    if constexpr (kIsFloat<T>) {
      out[i] = kernels::convert<T>(detail::fma(static_cast<double>(i), fstep, fstart));
    } else {
      out[i] = kernels::convert<T>(start + i * step);
    }
  }
};

template <typename T>
struct Arange {
  static void run(const ops::OpCall& call, const TensorView& out, const Scalar& start, const Scalar& step) {
    kernels::forall(site_of(call, "arange"), out.numel(),
                    ArangeBody<T>{out.ptr<T>(), start.to_int(), step.to_int(), start.to_double(), step.to_double()});
  }
};

inline void arange_kernel(const ops::OpCall& call, const TensorView& out, const Scalar& start, const Scalar& step) {
  kernels::dispatch<Arange>(out.dtype, call, out, start, step);
}

template <typename T>
struct LinspaceBody {
  T* out;
  int64_t steps;
  double start, end, step;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    // Counting from both ends (as PyTorch does) makes the last value exactly `end`.
    const double value = i < steps / 2 ? detail::fma(static_cast<double>(i), step, start)
                                       : detail::fma(-static_cast<double>(steps - 1 - i), step, end);
    out[i] = kernels::convert<T>(value);
  }
};

template <typename T>
struct Linspace {
  static void run(const ops::OpCall& call, const TensorView& out, double start, double end) {
    const int64_t steps = out.numel();
    if (steps == 1) end = start;  // a single value is start, as in PyTorch
    const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
    kernels::forall(site_of(call, "linspace"), steps, LinspaceBody<T>{out.ptr<T>(), steps, start, end, step});
  }
};

inline void linspace_kernel(const ops::OpCall& call, const TensorView& out, double start, double end) {
  kernels::dispatch<Linspace>(out.dtype, call, out, start, end);
}

template <typename T>
struct EyeBody {
  T* out;
  int64_t columns;
  STRATA_HOST_DEVICE void operator()(int64_t i) const {
    out[i] = kernels::convert<T>(i / columns == i % columns ? 1 : 0);
  }
};

template <typename T>
struct Eye {
  static void run(const ops::OpCall& call, const TensorView& out) {
    kernels::forall(site_of(call, "eye"), out.numel(), EyeBody<T>{out.ptr<T>(), out.shape[1]});
  }
};

inline void eye_kernel(const ops::OpCall& call, const TensorView& out) { kernels::dispatch<Eye>(out.dtype, call, out); }

/// One thread per Philox block: it writes the values i = block * per_block + lane (see Note [Random numbers on
/// every device]).
template <typename T>
struct RandomBody {
  T* out;
  int64_t n;
  ops::RandomSpec spec;
  STRATA_HOST_DEVICE void operator()(int64_t block) const {
    const PhiloxBlock b = philox_block(spec.seed, spec.offset + static_cast<std::uint64_t>(block));
    const std::uint32_t* w = b.w;
    T values[4] = {};
    int count = 0;  // stays 0 for a floating distribution of an integral T, which the tensors layer rejects
    if (spec.distribution == ops::Distribution::Integers) {
      count = 2;
      // 64 random bits modulo the range: the bias is below range / 2^64.
      const auto range = static_cast<std::uint64_t>(spec.high) - static_cast<std::uint64_t>(spec.low);
      for (int k = 0; k < 2; ++k) {
        const std::uint64_t bits = (static_cast<std::uint64_t>(w[2 * k]) << 32) | w[2 * k + 1];
        values[k] = kernels::convert<T>(static_cast<int64_t>(static_cast<std::uint64_t>(spec.low) + bits % range));
      }
    } else if constexpr (kIsFloat<T>) {
      if constexpr (std::is_same_v<T, double>) {
        count = 2;
        if (spec.distribution == ops::Distribution::Uniform) {
          values[0] = uniform_f64(w[0], w[1]);
          values[1] = uniform_f64(w[2], w[3]);
        } else {
          const double u2 = uniform_f64(w[2], w[3]);
          box_muller(1.0 - uniform_f64(w[0], w[1]), u2, values[0], values[1]);  // 1 - u is in (0, 1]
        }
      } else {
        count = 4;
        if (spec.distribution == ops::Distribution::Uniform) {
          for (int k = 0; k < 4; ++k) values[k] = uniform_value(w[k]);
        } else {
          for (int k = 0; k < 4; k += 2) {
            double z0, z1;
            box_muller(1.0 - static_cast<double>(uniform_f32(w[k])), static_cast<double>(uniform_f32(w[k + 1])), z0,
                       z1);
            values[k] = kernels::convert<T>(static_cast<float>(z0));
            values[k + 1] = kernels::convert<T>(static_cast<float>(z1));
          }
        }
      }
    }
    for (int k = 0; k < count; ++k) {
      const int64_t i = block * count + k;
      if (i < n) out[i] = values[k];
    }
  }

  // Uniform [0, 1) with only as many bits as T holds exactly, so that rounding can never produce 1.
  STRATA_HOST_DEVICE static T uniform_value(std::uint32_t word) {
    if constexpr (std::is_same_v<T, Half>) {
      return T(static_cast<float>(word >> 21) * (1.0f / 2048.0f));
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      return T(static_cast<float>(word >> 24) * (1.0f / 256.0f));
    } else {
      return kernels::convert<T>(uniform_f32(word));
    }
  }
};

template <typename T>
struct RandomFill {
  static void run(const ops::OpCall& call, const TensorView& out, const ops::RandomSpec& spec) {
    const int64_t n = out.numel();
    const int64_t per_block = ops::random_values_per_block(spec.distribution, out.dtype);
    kernels::forall(site_of(call, "random"), (n + per_block - 1) / per_block, RandomBody<T>{out.ptr<T>(), n, spec});
  }
};

inline void random_kernel(const ops::OpCall& call, const TensorView& out, const ops::RandomSpec& spec) {
  kernels::dispatch<RandomFill>(out.dtype, call, out, spec);
}

// Note [Sampling from rows of weights]
// multinomial draws each row in one thread, from Philox blocks of its own (ops/factory_kernels.h), so a row's
// samples depend only on (seed, offset, row) and are the same on every device. With replacement, sample s of a row
// takes a uniform u (lanes 2(s % 2), 2(s % 2) + 1 of block s / 2) and picks the first category whose running sum of
// weights exceeds u * total, skipping zero weights. Without replacement, category j gets the key w_j / E_j with E_j
// exponential (-log(1 - u_j)), and the samples are the categories of the num_samples largest keys, largest first:
// the same distribution as drawing one category at a time and removing it (Efraimidis and Spirakis), found in
// num_samples passes over the row, which needs no memory beyond the output.
template <typename T>
struct MultinomialBody {
  int64_t* out;
  const T* weights;
  int64_t categories, num_samples, blocks_per_row;
  bool replacement;
  std::uint64_t seed, offset;

  STRATA_HOST_DEVICE double uniform(int64_t row, int64_t i) const {
    const PhiloxBlock b = philox_block(seed, offset + static_cast<std::uint64_t>(row * blocks_per_row + i / 2));
    return i % 2 == 0 ? uniform_f64(b.w[0], b.w[1]) : uniform_f64(b.w[2], b.w[3]);
  }
  STRATA_HOST_DEVICE static double weight(const T* w, int64_t j) {
    if constexpr (std::is_same_v<T, double>)
      return w[j];
    else
      return static_cast<double>(static_cast<float>(w[j]));
  }
  STRATA_HOST_DEVICE double key(const T* w, int64_t row, int64_t j) const {
    return weight(w, j) / -portable_log(1.0 - uniform(row, j));  // 1 - u is in (0, 1]; log(1) = 0 gives inf
  }
  STRATA_HOST_DEVICE void operator()(int64_t row) const {
    const T* w = weights + row * categories;
    int64_t* o = out + row * num_samples;
    if (replacement) {
      double total = 0;
      int64_t last_positive = 0;
      for (int64_t j = 0; j < categories; ++j) {
        total += weight(w, j);
        if (weight(w, j) > 0) last_positive = j;
      }
      for (int64_t s = 0; s < num_samples; ++s) {
        const double target = uniform(row, s) * total;
        double running = 0;
        int64_t pick = last_positive;  // where rounding leaves the running sum short of the target
        for (int64_t j = 0; j < categories; ++j) {
          running += weight(w, j);
          if (weight(w, j) > 0 && running > target) {
            pick = j;
            break;
          }
        }
        o[s] = pick;
      }
      return;
    }
    double previous_key = 0;
    int64_t previous = -1;
    for (int64_t s = 0; s < num_samples; ++s) {
      double best_key = -1;
      int64_t best = -1;
      for (int64_t j = 0; j < categories; ++j) {
        if (!(weight(w, j) > 0)) continue;
        const double k = key(w, row, j);
        // Candidates come after the previous pick in the order (key descending, index ascending).
        const bool after_previous = previous < 0 || k < previous_key || (k == previous_key && j > previous);
        if (after_previous && (best < 0 || k > best_key)) {
          best_key = k;
          best = j;
        }
      }
      o[s] = best;  // the tensors layer has checked that a row has num_samples positive weights
      previous_key = best_key;
      previous = best;
    }
  }
};

template <typename T>
struct Multinomial {
  static void run(const ops::OpCall& call, const TensorView& out, const TensorView& weights, bool replacement,
                  std::uint64_t seed, std::uint64_t offset) {
    if constexpr (kIsFloat<T>) {
      const int64_t categories = weights.shape[weights.dim() - 1], num_samples = out.shape[out.dim() - 1];
      kernels::forall(site_of(call, "multinomial"), weights.numel() / categories,
                      MultinomialBody<T>{out.ptr<int64_t>(), weights.ptr<T>(), categories, num_samples,
                                         ops::multinomial_blocks_per_row(categories, num_samples, replacement),
                                         replacement, seed, offset});
    } else {
      STRATA_THROW(DTypeError, "{}: expected floating weights, got {}", call.op, dtype_of<T>);
    }
  }
};

inline void multinomial_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& weights,
                               bool replacement, std::uint64_t seed, std::uint64_t offset) {
  kernels::dispatch<Multinomial>(weights.dtype, call, out, weights, replacement, seed, offset);
}

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
