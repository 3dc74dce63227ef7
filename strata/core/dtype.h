#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "strata/core/half.h"

namespace strata {

enum class DType : std::uint8_t { Bool, U8, I32, I64, F16, BF16, F32, F64 };
inline constexpr int kDTypeCount = 8;

/// Short name as printed and as used in checkpoints: "f32", "bf16", "i64", "bool".
std::string_view dtype_name(DType dtype);
/// Parses the short names above; throws InvalidArgumentError otherwise.
DType parse_dtype(std::string_view name);
std::size_t dtype_size(DType dtype);
bool is_floating(DType dtype);
bool is_integral(DType dtype);  // bool counts as integral
/// Type promotion as users know it from PyTorch/NumPy for two tensor operands.
DType promote_types(DType a, DType b);

std::ostream& operator<<(std::ostream& os, DType dtype);

/// Maps a C++ type to its DType: `dtype_of<float> == DType::F32`.
namespace detail {
template <typename T>
consteval DType no_dtype_for() {
  static_assert(sizeof(T) == 0,
                "dtype_of<T>: T is not one of Strata's element types (bool, uint8_t, int32_t, "
                "int64_t, Half, BFloat16, float, double)");
  return DType::F32;
}
}  // namespace detail
template <typename T>
inline constexpr DType dtype_of = detail::no_dtype_for<T>();
template <> inline constexpr DType dtype_of<bool> = DType::Bool;
template <> inline constexpr DType dtype_of<std::uint8_t> = DType::U8;
template <> inline constexpr DType dtype_of<std::int32_t> = DType::I32;
template <> inline constexpr DType dtype_of<std::int64_t> = DType::I64;
template <> inline constexpr DType dtype_of<Half> = DType::F16;
template <> inline constexpr DType dtype_of<BFloat16> = DType::BF16;
template <> inline constexpr DType dtype_of<float> = DType::F32;
template <> inline constexpr DType dtype_of<double> = DType::F64;

/// Calls `f(T{})` with the C++ type of `dtype`; the one place that switches over every dtype.
template <typename F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Bool: return f(bool{});
    case DType::U8: return f(std::uint8_t{});
    case DType::I32: return f(std::int32_t{});
    case DType::I64: return f(std::int64_t{});
    case DType::F16: return f(Half{});
    case DType::BF16: return f(BFloat16{});
    case DType::F32: return f(float{});
    case DType::F64: return f(double{});
  }
  return f(float{});
}

}  // namespace strata

template <>
struct fmt::formatter<strata::DType> : fmt::formatter<std::string_view> {
  auto format(strata::DType d, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(strata::dtype_name(d), ctx);
  }
};
