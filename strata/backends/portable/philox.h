#pragma once

// Philox4x32-10 and the conversions of its bits to uniform and normal values, written once for host and device
// so that the same seed gives the same numbers everywhere (Note [Random numbers on every device] in
// ops/factory_kernels.h).

#include <cmath>
#include <cstdint>

#include "strata/core/macros.h"

namespace strata::portable {

struct PhiloxBlock {
  std::uint32_t w[4];
};

/// Philox4x32 with 10 rounds (Salmon et al., SC'11) of a 128-bit counter under a 64-bit key.
STRATA_HOST_DEVICE inline PhiloxBlock philox4x32_10(PhiloxBlock counter, std::uint32_t key0, std::uint32_t key1) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  std::uint32_t* c = counter.w;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c[2];
    const std::uint32_t next[4] = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ key0, static_cast<std::uint32_t>(p1),
                                   static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ key1, static_cast<std::uint32_t>(p0)};
    for (int k = 0; k < 4; ++k) c[k] = next[k];
  }
  return counter;
}

/// Block `index` of the stream of `seed`.
STRATA_HOST_DEVICE inline PhiloxBlock philox_block(std::uint64_t seed, std::uint64_t index) {
  const PhiloxBlock counter{{static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0u, 0u}};
  return philox4x32_10(counter, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

// Note [Same floats on host and device]
// Bit-identical results on the CPU and a GPU need every floating operation to round the same way. Additions,
// multiplications, divisions, sqrt and fma are correctly rounded on both (nvcc's default -prec-div/-prec-sqrt), but
// nvcc would fuse a plain `a * b + c` into an fma where the host compiler does not, and libm's log/sin/cos differ
// from CUDA's in the last bit. So the functions below write every multiply-add as an explicit fma and compute log
// and sin/cos with their own polynomials, in f64.

namespace detail {
STRATA_HOST_DEVICE inline double fma(double a, double b, double c) {
#if defined(STRATA_DEVICE_PASS)
  return ::fma(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
STRATA_HOST_DEVICE inline double sqrt(double x) {
#if defined(STRATA_DEVICE_PASS)
  return ::sqrt(x);
#else
  return std::sqrt(x);
#endif
}
}  // namespace detail

/// Natural logarithm of a positive, normal x (to about 1 ulp), reproducible on host and device.
STRATA_HOST_DEVICE inline double portable_log(double x) {
  std::uint64_t bits;
  STRATA_BIT_COPY(&bits, &x, sizeof bits);
  int64_t exponent = static_cast<int64_t>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;  // mantissa m in [1, 2)
  double m;
  STRATA_BIT_COPY(&m, &bits, sizeof m);
  if (m > 1.4142135623730951) {  // keep m in [sqrt(1/2), sqrt(2)] so that s stays small
    m *= 0.5;
    ++exponent;
  }
  // log(m) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...) with s = (m - 1) / (m + 1), |s| < 0.172.
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double p = 1.0 / 25;
  for (int k = 11; k >= 1; --k) p = detail::fma(p, s2, 1.0 / (2 * k + 1));
  const double log_m = 2.0 * detail::fma(s * s2, p, s);
  return detail::fma(static_cast<double>(exponent), 0.6931471805599453, log_m);
}

/// sin(2 pi v) and cos(2 pi v) for v in [0, 1), reproducible on host and device.
STRATA_HOST_DEVICE inline void portable_sincos_2pi(double v, double& sin_out, double& cos_out) {
  // 2 pi v = q pi/2 + x with q the nearest quarter turn, |x| <= pi/4; 4v - q is exact.
  const double quarters = 4.0 * v;
  const double q = static_cast<double>(static_cast<int64_t>(quarters + 0.5));
  const double x = (quarters - q) * 1.5707963267948966;
  const double x2 = x * x;
  // Taylor series to x^17 / x^16: the first omitted term is below 1e-17 for |x| <= pi/4.
  constexpr double kSin[8] = {-1.0 / 6,        1.0 / 120,        -1.0 / 5040,          1.0 / 362880,
                              -1.0 / 39916800, 1.0 / 6227020800, -1.0 / 1307674368000, 1.0 / 355687428096000};
  constexpr double kCos[8] = {-1.0 / 2,       1.0 / 24,        -1.0 / 720,         1.0 / 40320,
                              -1.0 / 3628800, 1.0 / 479001600, -1.0 / 87178291200, 1.0 / 20922789888000};
  double ps = kSin[7];
  double pc = kCos[7];
  for (int k = 6; k >= 0; --k) {
    ps = detail::fma(ps, x2, kSin[k]);
    pc = detail::fma(pc, x2, kCos[k]);
  }
  const double s = detail::fma(x * x2, ps, x);
  const double c = detail::fma(x2, pc, 1.0);
  switch (static_cast<int>(q) & 3) {
    case 0:
      sin_out = s;
      cos_out = c;
      break;
    case 1:
      sin_out = c;
      cos_out = -s;
      break;
    case 2:
      sin_out = -s;
      cos_out = -c;
      break;
    default:
      sin_out = -c;
      cos_out = s;
      break;
  }
}

/// Uniform in [0, 1) from the top 24 bits of a word (exact in f32).
STRATA_HOST_DEVICE inline float uniform_f32(std::uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

/// Uniform in [0, 1) from 53 bits of two words (exact in f64).
STRATA_HOST_DEVICE inline double uniform_f64(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t bits = ((static_cast<std::uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

/// Two independent standard normal values from two uniforms, u1 in (0, 1] and u2 in [0, 1) (Box-Muller).
STRATA_HOST_DEVICE inline void box_muller(double u1, double u2, double& z0, double& z1) {
  const double r = detail::sqrt(-2.0 * portable_log(u1));
  double s, c;
  portable_sincos_2pi(u2, s, c);
  z0 = r * c;
  z1 = r * s;
}

}  // namespace strata::portable
