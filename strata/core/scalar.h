#pragma once

#include <cstdint>
#include <type_traits>

#include "strata/core/dtype.h"

namespace strata {

/// A number passed by value to an op (`add(t, 2.5)`, `full(shape, 7)`): either floating, integral or boolean.
class Scalar {
 public:
  enum class Kind : std::uint8_t { Bool, Int, Float };

  Scalar() : Scalar(0) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(static_cast<double>(v)) {}  // NOLINT
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}  // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  /// Floats are truncated toward zero and saturate, as Rust's `as` does: NaN gives 0 and values beyond int64 its
  /// ends (a plain cast is undefined behaviour there). Ops that store a scalar check it fits first (fill_).
  int64_t to_int() const {
    if (kind_ != Kind::Float) return i_;
    if (d_ != d_) return 0;
    if (d_ >= 0x1p63) return INT64_MAX;
    if (d_ < -0x1p63) return INT64_MIN;
    return static_cast<int64_t>(d_);
  }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0; }

  /// The value converted to the C++ type T.
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(to_int());
    else return static_cast<T>(static_cast<float>(to_double()));
  }

  /// The dtype a tensor created from this scalar alone gets (f32 for floats, i64 for ints, bool for bools).
  DType default_dtype() const {
    switch (kind_) {
      case Kind::Bool: return DType::Bool;
      case Kind::Int: return DType::I64;
      case Kind::Float: return DType::F32;
    }
    return DType::F32;
  }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

template <>
inline double Scalar::to<double>() const {
  return to_double();
}
template <>
inline float Scalar::to<float>() const {
  return static_cast<float>(to_double());
}

}  // namespace strata
