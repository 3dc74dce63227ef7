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

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
