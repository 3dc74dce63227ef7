#pragma once

// The math of the elementwise ops, one functor per op (Note [Elementwise math]); the loops that apply them are in
// elementwise_ops.h. Everything here compiles for the host and, under nvcc, for the device.

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

#include "strata/core/half.h"
#include "strata/core/macros.h"
#include "strata/core/scalar.h"
#include "strata/kernels/launch.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

// Note [Elementwise math]
// Each op is a functor over the compute type M = OpMath<T>: f32 for f16/bf16 (PyTorch's "opmath"), T otherwise.
// Loops load T, convert it to M, apply the op and store the result as T, or as bool for predicates. kSupported
// says for which storage types an op has kernels; the tensors layer never asks for others, and no kernel is
// instantiated for them. Integer arithmetic goes through the unsigned type, so overflow wraps (as in PyTorch)
// instead of being undefined. A scalar operand is held in M by the functor, so it reaches a GPU kernel by value.

template <typename T>
using OpMath = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
template <typename T>
inline constexpr bool kIsBool = std::is_same_v<T, bool>;
template <typename T>
inline constexpr bool kIsFloat = !std::is_integral_v<T>;  // f16, bf16, f32, f64
template <typename T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !kIsBool<T>;

/// Whether an op is expensive enough per element (transcendentals) to be split across threads sooner.
template <typename Op>
constexpr bool costly() {
  if constexpr (requires { Op::kCostly; }) return Op::kCostly;
  return false;
}

// Note [Vector math from libmvec]
// g++ vectorises a loop that calls a math function only when the function is declared with the simd attribute (it
// then calls the function's vector variant on 4 values at a time) and as const (a libm call may write errno, which
// keeps the calls in order). glibc's <math.h> declares both only under -ffast-math, which the build does not use,
// so the f32 exp, tanh, erf, sin and cos of the elementwise ops were one scalar libm call per element: erf ran 14
// times, GELU's derivatives 6 to 8 times and sin, cos and exp 2.3 times slower than they do now (one core,
// bench/elementwise_bench.cpp). On x86-64 with glibc 2.35 or later (erff and tanhf came then), fmath below calls
// libm's functions through declarations of its own with those attributes, under their C names (assembler labels);
// their vector variants (_ZGVbN4v_erff...: SSE, the build's baseline ISA) are glibc's libmvec, which the libm.so
// linker script links as needed. They are within 3 ulp of the f64 result where libm's scalar functions are within
// 1 (measured on [-10, 10], sin and cos on [-1e4, 1e4]: expf 2.9, sinf 2.5, cosf 2.1, erff 1.8, tanhf 1.0;
// tests/ops/vector_math_test.cpp holds them to 4), and give libm's special values. Only the host compiler sees
// these declarations; device code and other compilers call the C functions.
#if defined(__GNUC__) && !defined(__clang__) && !defined(STRATA_GPU_COMPILER) && defined(__x86_64__) && \
    defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define STRATA_LIBMVEC 1
extern "C" {
__attribute__((const, simd("notinbranch"))) float strata_libmvec_expf(float) noexcept __asm__("expf");
__attribute__((const, simd("notinbranch"))) float strata_libmvec_tanhf(float) noexcept __asm__("tanhf");
__attribute__((const, simd("notinbranch"))) float strata_libmvec_erff(float) noexcept __asm__("erff");
__attribute__((const, simd("notinbranch"))) float strata_libmvec_sinf(float) noexcept __asm__("sinf");
__attribute__((const, simd("notinbranch"))) float strata_libmvec_cosf(float) noexcept __asm__("cosf");
}
#endif

namespace fmath {  // the C math functions by type, callable from host and device code
#if defined(STRATA_LIBMVEC)
inline float exp(float x) { return strata_libmvec_expf(x); }
inline float tanh(float x) { return strata_libmvec_tanhf(x); }
inline float erf(float x) { return strata_libmvec_erff(x); }
inline float sin(float x) { return strata_libmvec_sinf(x); }
inline float cos(float x) { return strata_libmvec_cosf(x); }
#else
STRATA_HOST_DEVICE inline float exp(float x) { return ::expf(x); }
STRATA_HOST_DEVICE inline float tanh(float x) { return ::tanhf(x); }
STRATA_HOST_DEVICE inline float erf(float x) { return ::erff(x); }
STRATA_HOST_DEVICE inline float sin(float x) { return ::sinf(x); }
STRATA_HOST_DEVICE inline float cos(float x) { return ::cosf(x); }
#endif
STRATA_HOST_DEVICE inline double exp(double x) { return ::exp(x); }
STRATA_HOST_DEVICE inline float log(float x) { return ::logf(x); }
STRATA_HOST_DEVICE inline double log(double x) { return ::log(x); }
STRATA_HOST_DEVICE inline float sqrt(float x) { return ::sqrtf(x); }
STRATA_HOST_DEVICE inline double sqrt(double x) { return ::sqrt(x); }
STRATA_HOST_DEVICE inline double tanh(double x) { return ::tanh(x); }
STRATA_HOST_DEVICE inline double erf(double x) { return ::erf(x); }
STRATA_HOST_DEVICE inline double sin(double x) { return ::sin(x); }
STRATA_HOST_DEVICE inline double cos(double x) { return ::cos(x); }
STRATA_HOST_DEVICE inline float fabs(float x) { return ::fabsf(x); }
STRATA_HOST_DEVICE inline double fabs(double x) { return ::fabs(x); }
STRATA_HOST_DEVICE inline float pow(float x, float y) { return ::powf(x, y); }
STRATA_HOST_DEVICE inline double pow(double x, double y) { return ::pow(x, y); }
/// x with its magnitude limited to `limit` (NaN stays NaN), on the bits: a float comparison may raise FE_INVALID, so
/// GCC (with its default -ftrapping-math) will not turn one into a vector select, and a loop with one stays scalar.
STRATA_HOST_DEVICE inline float clamp_magnitude(float x, float limit) {
  std::uint32_t bits, limit_bits;
  STRATA_BIT_COPY(&bits, &x, sizeof bits);
  STRATA_BIT_COPY(&limit_bits, &limit, sizeof limit_bits);
  const auto magnitude = static_cast<std::int32_t>(bits & 0x7fffffffu), bound = static_cast<std::int32_t>(limit_bits);
  const std::int32_t kept = magnitude > bound && magnitude <= 0x7f800000 ? bound : magnitude;
  const std::uint32_t out = static_cast<std::uint32_t>(kept) | (bits & 0x80000000u);
  float result;
  STRATA_BIT_COPY(&result, &out, sizeof result);
  return result;
}
/// tanh in f32 as a rational function (Eigen's generic_fast_tanh_float: a degree-13 odd polynomial over a degree-6
/// even one on [-7.905, 7.905], where it reaches +-1 in f32). Within 4e-7 relative error (7 ulp) of tanh, and free of
/// libm calls and branches, so that the compiler vectorises the loops that use it: GELU's forms ran at the speed of
/// one scalar tanhf or erff call per element, 5 to 10 times slower than PyTorch's vectorised ones.
STRATA_HOST_DEVICE inline float rational_tanh(float x) {
  const float c = clamp_magnitude(x, 7.90531110763549805f);
  const float x2 = c * c;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return c * p / q;
}
/// erf in f32 as a rational function (Eigen's generic_fast_erf_float: a degree-13 odd polynomial over a degree-8
/// even one on [-4, 4], where erf reaches +-1 in f32). Within 4.3e-7 of erf, vectorisable as rational_tanh is.
STRATA_HOST_DEVICE inline float rational_erf(float x) {
  const float c = clamp_magnitude(x, 4.0f);
  const float x2 = c * c;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return c * p / q;
}
/// The GELU forwards use these: the rational forms in f32 (and so for f16 and bf16), libm's in f64. Their
/// derivatives keep libm's functions (vectorised: Note [Vector math from libmvec]): near the derivatives' zero
/// (x = -0.75) their terms cancel, and the rational forms' errors would show at PyTorch's tolerances.
STRATA_HOST_DEVICE inline float gelu_erf_of(float x) { return rational_erf(x); }
STRATA_HOST_DEVICE inline double gelu_erf_of(double x) { return ::erf(x); }
STRATA_HOST_DEVICE inline float gelu_tanh_of(float x) { return rational_tanh(x); }
STRATA_HOST_DEVICE inline double gelu_tanh_of(double x) { return ::tanh(x); }
}  // namespace fmath

template <typename M>
STRATA_HOST_DEVICE inline M wrapping_add(M a, M b) {
  if constexpr (kIsInt<M>) {
    using U = std::make_unsigned_t<M>;
    return static_cast<M>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename M>
STRATA_HOST_DEVICE inline M wrapping_sub(M a, M b) {
  if constexpr (kIsInt<M>) {
    using U = std::make_unsigned_t<M>;
    return static_cast<M>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}
template <typename M>
STRATA_HOST_DEVICE inline M wrapping_mul(M a, M b) {
  if constexpr (kIsInt<M>) {
    using U = std::make_unsigned_t<M>;
    return static_cast<M>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}
/// Integer power by squaring; a negative exponent gives 0 unless the base is 1 or -1 (as PyTorch).
template <typename M>
STRATA_HOST_DEVICE inline M integer_pow(M base, M exponent) {
  if constexpr (std::is_signed_v<M>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exponent & 1) ? M(-1) : M(1);
      return 0;
    }
  }
  M result = 1;
  while (exponent != 0) {
    if (exponent & 1) result = wrapping_mul(result, base);
    exponent = static_cast<M>(exponent >> 1);
    base = wrapping_mul(base, base);
  }
  return result;
}
template <typename M>
STRATA_HOST_DEVICE inline bool truthy(M x) {
  if constexpr (kIsBool<M>)
    return x;
  else
    return x != M(0);
}

template <typename T>
struct AddOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE M operator()(M a, M b) const {
    if constexpr (kIsBool<T>)
      return a || b;
    else
      return wrapping_add(a, b);
  }
};
template <typename T>
struct SubOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = !kIsBool<T>;
  STRATA_HOST_DEVICE M operator()(M a, M b) const { return wrapping_sub(a, b); }
};
template <typename T>
struct MulOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE M operator()(M a, M b) const {
    if constexpr (kIsBool<T>)
      return a && b;
    else
      return wrapping_mul(a, b);
  }
};
template <typename T>
struct SquareOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = !kIsBool<T>;
  STRATA_HOST_DEVICE M operator()(M a) const { return wrapping_mul(a, a); }
};
template <typename T>
struct DivOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  STRATA_HOST_DEVICE M operator()(M a, M b) const { return a / b; }
};
/// relu's gradient: g where the relu's input x is positive, else 0 (one pass instead of gt and where).
template <typename T>
struct ReluGradOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  STRATA_HOST_DEVICE M operator()(M g, M x) const { return x > M(0) ? g : M(0); }
};
template <typename T>
struct PowOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = !kIsBool<T>;
  static constexpr bool kCostly = kIsFloat<T>;
  STRATA_HOST_DEVICE M operator()(M a, M b) const {
    if constexpr (kIsFloat<T>)
      return fmath::pow(a, b);
    else
      return integer_pow(a, b);
  }
};
// maximum/minimum propagate NaN, as PyTorch's do.
template <typename T>
struct MaxOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE M operator()(M a, M b) const {
    if constexpr (kIsFloat<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a > b ? a : b;
  }
};
template <typename T>
struct MinOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE M operator()(M a, M b) const {
    if constexpr (kIsFloat<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a < b ? a : b;
  }
};
template <typename T>
struct EqOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE bool operator()(M a, M b) const { return a == b; }
};
template <typename T>
struct NeOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE bool operator()(M a, M b) const { return a != b; }
};
template <typename T>
struct LtOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE bool operator()(M a, M b) const { return a < b; }
};
template <typename T>
struct LeOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE bool operator()(M a, M b) const { return a <= b; }
};
template <typename T>
struct AndOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE bool operator()(M a, M b) const { return truthy(a) && truthy(b); }
};
template <typename T>
struct OrOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE bool operator()(M a, M b) const { return truthy(a) || truthy(b); }
};
template <typename T>
struct XorOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE bool operator()(M a, M b) const { return truthy(a) != truthy(b); }
};
template <typename T>
struct NotOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = true;
  STRATA_HOST_DEVICE bool operator()(M a) const { return !truthy(a); }
};
template <typename T>
struct NegOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = !kIsBool<T>;
  STRATA_HOST_DEVICE M operator()(M a) const { return wrapping_sub(M(0), a); }
};
template <typename T>
struct AbsOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = !kIsBool<T>;
  STRATA_HOST_DEVICE M operator()(M a) const {
    if constexpr (kIsFloat<T>)
      return fmath::fabs(a);
    else if constexpr (std::is_signed_v<M>)
      return a < 0 ? wrapping_sub(M(0), a) : a;
    else
      return a;
  }
};
template <typename T>
struct ReluOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = !kIsBool<T>;
  STRATA_HOST_DEVICE M operator()(M a) const {
    if constexpr (std::is_unsigned_v<M>)
      return a;
    else
      return a < M(0) ? M(0) : a;  // NaN stays NaN
  }
};
template <typename T>
struct ExpOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  static constexpr bool kCostly = true;
  STRATA_HOST_DEVICE M operator()(M a) const { return fmath::exp(a); }
};
template <typename T>
struct LogOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  static constexpr bool kCostly = true;
  STRATA_HOST_DEVICE M operator()(M a) const { return fmath::log(a); }
};
template <typename T>
struct SqrtOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  STRATA_HOST_DEVICE M operator()(M a) const { return fmath::sqrt(a); }
};
template <typename T>
struct RsqrtOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  STRATA_HOST_DEVICE M operator()(M a) const { return M(1) / fmath::sqrt(a); }
};
template <typename T>
struct TanhOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  static constexpr bool kCostly = true;
  STRATA_HOST_DEVICE M operator()(M a) const { return fmath::tanh(a); }
};
template <typename T>
struct SigmoidOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  static constexpr bool kCostly = true;
  STRATA_HOST_DEVICE M operator()(M a) const { return M(1) / (M(1) + fmath::exp(-a)); }
};
/// The exact (erf) form: x * Phi(x).
template <typename T>
struct GeluOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  static constexpr bool kCostly = true;
  STRATA_HOST_DEVICE M operator()(M a) const {
    return M(0.5) * a * (M(1) + fmath::gelu_erf_of(a * M(0.70710678118654752440)));
  }
};
/// The tanh approximation (PyTorch's approximate="tanh"): x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
template <typename T>
struct GeluTanhOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  static constexpr bool kCostly = true;
  STRATA_HOST_DEVICE M operator()(M a) const {
    const M inner = M(0.79788456080286535588) * (a + M(0.044715) * a * a * a);
    return M(0.5) * a * (M(1) + fmath::gelu_tanh_of(inner));
  }
};
/// GELU's derivatives applied to the incoming gradient g at the input x, one pass each instead of a dozen ops:
/// exact, Phi(x) + x phi(x); tanh form, (1 + t) / 2 + x/2 (1 - t^2) k (1 + 3 c x^2) with t = tanh(k (x + c x^3)).
template <typename T>
struct GeluGradOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  static constexpr bool kCostly = true;
  STRATA_HOST_DEVICE M operator()(M g, M x) const {
    const M cdf = M(0.5) * (M(1) + fmath::erf(x * M(0.70710678118654752440)));
    const M pdf = fmath::exp(M(-0.5) * x * x) * M(0.39894228040143267794);
    return g * (cdf + x * pdf);
  }
};
template <typename T>
struct GeluTanhGradOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  static constexpr bool kCostly = true;
  STRATA_HOST_DEVICE M operator()(M g, M x) const {
    constexpr M k = M(0.79788456080286535588), c = M(0.044715);
    const M x2 = x * x;
    const M t = fmath::tanh(k * (x + c * x * x2));  // libm's (see gelu_erf_of)
    return g * (M(0.5) * (M(1) + t) + M(0.5) * x * (M(1) - t * t) * k * (M(1) + M(3) * c * x2));
  }
};
template <typename T>
struct SinOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  static constexpr bool kCostly = true;
  STRATA_HOST_DEVICE M operator()(M a) const { return fmath::sin(a); }
};
template <typename T>
struct CosOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  static constexpr bool kCostly = true;
  STRATA_HOST_DEVICE M operator()(M a) const { return fmath::cos(a); }
};
template <typename T>
struct ErfOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = kIsFloat<T>;
  static constexpr bool kCostly = true;
  STRATA_HOST_DEVICE M operator()(M a) const { return fmath::erf(a); }
};

/// a + alpha * b (bool: a or (alpha and b)).
template <typename T>
struct AddAlphaOp {
  using M = OpMath<T>;
  M alpha;
  STRATA_HOST_DEVICE M operator()(M a, M b) const {
    if constexpr (kIsBool<T>)
      return a || (alpha && b);
    else
      return wrapping_add(a, wrapping_mul(alpha, b));
  }
};

/// min(max(a, lo), hi) with missing bounds at the ends of M's range; NaN stays NaN.
template <typename T>
struct ClampOp {
  using M = OpMath<T>;
  static constexpr bool kSupported = !kIsBool<T>;
  M lo, hi;
  STRATA_HOST_DEVICE M operator()(M a) const {
    const M r = a < lo ? lo : a;
    return r > hi ? hi : r;
  }
  static ClampOp make(const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
    if constexpr (kIsFloat<T>) {
      constexpr M inf = std::numeric_limits<M>::infinity();
      return {lo ? lo->to<M>() : -inf, hi ? hi->to<M>() : inf};
    } else {  // integer bounds saturate: clamp(u8, -5) leaves every value alone
      constexpr M min = std::numeric_limits<M>::lowest(), max = std::numeric_limits<M>::max();
      const auto saturate = [](const Scalar& s) {
        const double v = s.to_double();
        return v <= static_cast<double>(min) ? min : v >= static_cast<double>(max) ? max : static_cast<M>(s.to_int());
      };
      return {lo ? saturate(*lo) : min, hi ? saturate(*hi) : max};
    }
  }
};

/// op(a, s) and op(s, a) for a scalar s held by value.
template <typename Op, typename M>
struct BindSecond {
  static constexpr bool kCostly = costly<Op>();
  Op op;
  M s;
  STRATA_HOST_DEVICE auto operator()(M a) const { return op(a, s); }
};
template <typename Op, typename M>
struct BindFirst {
  static constexpr bool kCostly = costly<Op>();
  Op op;
  M s;
  STRATA_HOST_DEVICE auto operator()(M a) const { return op(s, a); }
};

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
