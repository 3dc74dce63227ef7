#pragma once

#include <bit>
#include <cstdint>

#include "strata/core/macros.h"

namespace strata {

// Note [Half types]
// f16 and bf16 are stored as raw 16-bit patterns and converted through f32 for arithmetic, on the host and in
// kernels alike. Conversions round to nearest even. This keeps one definition for CPU and GPU code; the CUDA
// backend may use native instructions where it matters for speed.

namespace detail {
STRATA_HOST_DEVICE inline std::uint32_t f32_bits(float f) {
  std::uint32_t u;
  STRATA_BIT_COPY(&u, &f, sizeof u);
  return u;
}
STRATA_HOST_DEVICE inline float bits_f32(std::uint32_t u) {
  float f;
  STRATA_BIT_COPY(&f, &u, sizeof f);
  return f;
}
}  // namespace detail

struct BFloat16 {
  std::uint16_t bits = 0;
  BFloat16() = default;
  STRATA_HOST_DEVICE BFloat16(float f) {  // NOLINT: implicit like a built-in float type
    std::uint32_t u = detail::f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN stays a quiet NaN
      bits = static_cast<std::uint16_t>((u >> 16) | 0x40u);
      return;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = static_cast<std::uint16_t>(u >> 16);
  }
  STRATA_HOST_DEVICE operator float() const { return detail::bits_f32(static_cast<std::uint32_t>(bits) << 16); }
};

struct Half {
  std::uint16_t bits = 0;
  Half() = default;
  STRATA_HOST_DEVICE Half(float f) {  // NOLINT
    const std::uint32_t u = detail::f32_bits(f);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const std::uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) {  // inf or NaN
      bits = static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
      return;
    }
    if (abs >= 0x477ff000u) {  // rounds to above the largest half: inf
      bits = static_cast<std::uint16_t>(sign | 0x7c00u);
      return;
    }
    if (abs < 0x38800000u) {  // subnormal half (or zero): let float addition do the rounding
      const float magic = detail::bits_f32(0x3f000000u);  // 0.5: aligns the mantissa to the subnormal ulp
      const float r = detail::bits_f32(abs) + magic;
      bits = static_cast<std::uint16_t>(sign | (detail::f32_bits(r) - 0x3f000000u));
      return;
    }
    std::uint32_t m = abs + 0xc8000fffu + ((abs >> 13) & 1u);  // rebias exponent and round to nearest even
    bits = static_cast<std::uint16_t>(sign | (m >> 13));
  }
  STRATA_HOST_DEVICE operator float() const {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t exp = (bits >> 10) & 0x1fu;
    const std::uint32_t mant = bits & 0x3ffu;
    if (exp == 0x1f) return detail::bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      // subnormal: mant * 2^-24
      const float v = static_cast<float>(mant) * detail::bits_f32(0x33800000u);
      return sign ? -v : v;
    }
    return detail::bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

}  // namespace strata
