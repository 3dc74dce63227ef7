#include "strata/core/dtype.h"

#include <array>
#include <ostream>

#include "strata/core/error.h"

namespace strata {

namespace {
constexpr std::array<std::string_view, kDTypeCount> kNames = {"bool", "u8", "i32", "i64", "f16", "bf16", "f32", "f64"};
constexpr std::array<std::size_t, kDTypeCount> kSizes = {1, 1, 4, 8, 2, 2, 4, 8};
}  // namespace

std::string_view dtype_name(DType dtype) { return kNames[static_cast<int>(dtype)]; }

DType parse_dtype(std::string_view name) {
  for (int i = 0; i < kDTypeCount; ++i) {
    if (kNames[i] == name) return static_cast<DType>(i);
  }
  STRATA_THROW(InvalidArgumentError, "unknown dtype '{}'; expected one of bool, u8, i32, i64, f16, bf16, f32, f64",
               name);
}

std::size_t dtype_size(DType dtype) { return kSizes[static_cast<int>(dtype)]; }

bool is_floating(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32 || dtype == DType::F64;
}

bool is_integral(DType dtype) { return !is_floating(dtype); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // f16 with bf16 has no exact common 16-bit type: PyTorch promotes to f32.
  if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
  if (is_floating(a) != is_floating(b)) return is_floating(a) ? a : b;
  // Within one category the enum order is the promotion order.
  return static_cast<int>(a) > static_cast<int>(b) ? a : b;
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

}  // namespace strata
