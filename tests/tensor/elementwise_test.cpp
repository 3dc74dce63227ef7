#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/ops/checks.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

constexpr DType kAllDTypes[] = {DType::Bool, DType::U8,   DType::I32, DType::I64,
                                DType::F16,  DType::BF16, DType::F32, DType::F64};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// --- the plain reference, computed in double on the host ---

/// A tensor of `dtype` on `device` holding `values` (converted from f64 by the copy kernel); 0-D for shape {}.
Tensor make(const std::vector<double>& values, const Shape& shape, DType dtype, Device device) {
  if (shape.empty()) return scalar_tensor(values.at(0), DType::F64).to(dtype).to(device);
  return tensor<double>(values, shape).to(dtype).to(device);
}

/// What storing x in `dtype` gives: rounding for floats, wrapping for integers.
double stored(double x, DType dtype) {
  switch (dtype) {
    case DType::Bool: return x != 0 ? 1 : 0;
    case DType::U8: return static_cast<std::uint8_t>(static_cast<int64_t>(x));
    case DType::I32: return static_cast<int32_t>(static_cast<int64_t>(x));
    case DType::I64: return static_cast<double>(static_cast<int64_t>(x));
    case DType::F16: return static_cast<float>(Half(static_cast<float>(x)));
    case DType::BF16: return static_cast<float>(BFloat16(static_cast<float>(x)));
    case DType::F32: return static_cast<float>(x);
    case DType::F64: return x;
  }
  return x;
}

/// Relative tolerance of a result stored in `dtype` (its half-ulp plus room for the f32 compute path).
double tolerance(DType dtype) {
  switch (dtype) {
    case DType::F16: return 1.5e-3;
    case DType::BF16: return 1e-2;
    case DType::F32: return 2e-6;
    case DType::F64: return 1e-13;
    default: return 0;
  }
}

/// Index into `shape` of the element that index `i` of the broadcast shape `out` reads (numpy rules).
int64_t broadcast_index(const Shape& shape, const Shape& out, int64_t i) {
  int64_t index = 0, stride = 1;
  for (int64_t d = out.ssize() - 1; d >= 0; --d) {
    const int64_t coord = i % out[d];
    i /= out[d];
    const int64_t k = d - (out.ssize() - shape.ssize());
    if (k >= 0) {
      if (shape[k] != 1) index += coord * stride;
      stride *= shape[k];
    }
  }
  return index;
}

void expect_values(const Tensor& result, const std::vector<double>& expected, const std::string& what) {
  const std::vector<double> got = result.to_vector<double>();
  ASSERT_EQ(got.size(), expected.size()) << what;
  const double tol = tolerance(result.dtype());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "]: got " << got[i] << ", expected NaN";
    } else if (std::isinf(expected[i]) || tol == 0) {
      EXPECT_EQ(got[i], expected[i]) << what << " [" << i << "]";
    } else {
      EXPECT_NEAR(got[i], expected[i], tol * std::max(1.0, std::abs(expected[i]))) << what << " [" << i << "]";
    }
  }
}

/// Checks op(a, b) against ref on every element of the broadcast shape, stored as `dtype`.
void expect_binary(const Tensor& result, const Tensor& a, const Tensor& b, DType dtype, const std::string& what,
                   const std::function<double(double, double)>& ref) {
  const Shape out = ops::broadcast_shapes("reference", a.shape(), b.shape());
  ASSERT_EQ(result.shape(), out) << what;
  ASSERT_EQ(result.dtype(), dtype) << what;
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> expected(static_cast<std::size_t>(numel(out)));
  for (int64_t i = 0; i < numel(out); ++i) {
    expected[i] = stored(ref(av[broadcast_index(a.shape(), out, i)], bv[broadcast_index(b.shape(), out, i)]), dtype);
  }
  expect_values(result, expected, what);
}

void expect_unary(const Tensor& result, const Tensor& a, DType dtype, const std::string& what,
                  const std::function<double(double)>& ref) {
  ASSERT_EQ(result.shape(), a.shape()) << what;
  ASSERT_EQ(result.dtype(), dtype) << what;
  std::vector<double> expected;
  for (double x : a.to_vector<double>()) expected.push_back(stored(ref(x), dtype));
  expect_values(result, expected, what);
}

std::string name(DType a, DType b) { return fmt::format("{} with {}", a, b); }

class Elementwise : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  Tensor make(const std::vector<double>& v, const Shape& shape, DType dtype = DType::F32) const {
    return strata::make(v, shape, dtype, device());
  }
};

// --- type promotion ---

TEST_P(Elementwise, PromotionTableForEveryDTypePair) {
  // Rows and columns in kAllDTypes order; PyTorch's table for these dtypes.
  const char* const table[8][8] = {
      {"bool", "u8", "i32", "i64", "f16", "bf16", "f32", "f64"},
      {"u8", "u8", "i32", "i64", "f16", "bf16", "f32", "f64"},
      {"i32", "i32", "i32", "i64", "f16", "bf16", "f32", "f64"},
      {"i64", "i64", "i64", "i64", "f16", "bf16", "f32", "f64"},
      {"f16", "f16", "f16", "f16", "f16", "f32", "f32", "f64"},
      {"bf16", "bf16", "bf16", "bf16", "f32", "bf16", "f32", "f64"},
      {"f32", "f32", "f32", "f32", "f32", "f32", "f32", "f64"},
      {"f64", "f64", "f64", "f64", "f64", "f64", "f64", "f64"},
  };
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      const DType da = kAllDTypes[i], db = kAllDTypes[j], want = parse_dtype(table[i][j]);
      const Tensor a = make({1, 0, 1, 0}, {4}, da), b = make({1, 1, 0, 0}, {4}, db);
      const std::string what = name(da, db);
      expect_binary(add(a, b), a, b, want, "add " + what, std::plus<>());
      expect_binary(mul(a, b), a, b, want, "mul " + what, std::multiplies<>());
      expect_binary(maximum(a, b), a, b, want, "max " + what, [](double x, double y) { return std::max(x, y); });
      expect_binary(eq(a, b), a, b, DType::Bool, "eq " + what, std::equal_to<>());
      expect_binary(lt(a, b), a, b, DType::Bool, "lt " + what, std::less<>());
      expect_binary(logical_or(a, b), a, b, DType::Bool, "or " + what, std::logical_or<>());
      const DType div_type = is_floating(want) ? want : DType::F32;
      const Tensor b_nonzero = make({1, 2, 1, 2}, {4}, db);
      expect_binary(div(a, b_nonzero), a, b_nonzero, div_type, "div " + what, std::divides<>());
      if (da != DType::Bool && db != DType::Bool) {
        expect_binary(sub(a, b), a, b, want, "sub " + what, std::minus<>());
      }
    }
  }
}

TEST_P(Elementwise, ScalarKeepsTheTensorDTypeUnlessOfAHigherCategory) {
  EXPECT_EQ((make({1}, {1}, DType::F16) + 2.5).dtype(), DType::F16);
  EXPECT_EQ((make({1}, {1}, DType::BF16) * 2).dtype(), DType::BF16);
  EXPECT_EQ((make({1}, {1}, DType::I32) + 2.5).dtype(), DType::F32);
  EXPECT_EQ((make({1}, {1}, DType::I32) + int64_t{2}).dtype(), DType::I32);
  EXPECT_EQ((make({1}, {1}, DType::U8) * 3).dtype(), DType::U8);
  EXPECT_EQ((make({1}, {1}, DType::Bool) + 1).dtype(), DType::I64);
  EXPECT_EQ((make({1}, {1}, DType::Bool) * true).dtype(), DType::Bool);
  EXPECT_EQ((make({1}, {1}, DType::Bool) + 0.5).dtype(), DType::F32);
  EXPECT_EQ((make({1}, {1}, DType::I64) / 2).dtype(), DType::F32);
  EXPECT_EQ((make({1}, {1}, DType::F64) / 2).dtype(), DType::F64);
  EXPECT_EQ(pow(make({1}, {1}, DType::I32), 2).dtype(), DType::I32);
  EXPECT_EQ(pow(make({1}, {1}, DType::I32), 0.5).dtype(), DType::F32);
}

TEST_P(Elementwise, ScalarOperatorsMatchReference) {
  for (DType dtype : {DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64}) {
    const Tensor a = make({-3, 1, 2, 5, 8}, {5}, dtype);
    const std::string what = fmt::format("{}", dtype);
    expect_unary(a + 3, a, dtype, "t + 3 " + what, [](double x) { return x + 3; });
    expect_unary(a - 3, a, dtype, "t - 3 " + what, [](double x) { return x - 3; });
    expect_unary(a * 3, a, dtype, "t * 3 " + what, [](double x) { return x * 3; });
    expect_unary(3 + a, a, dtype, "3 + t " + what, [](double x) { return 3 + x; });
    expect_unary(3 - a, a, dtype, "3 - t " + what, [](double x) { return 3 - x; });
    expect_unary(3 * a, a, dtype, "3 * t " + what, [](double x) { return 3 * x; });
    const DType div_type = is_floating(dtype) ? dtype : DType::F32;
    expect_unary(a / 4, a, div_type, "t / 4 " + what, [](double x) { return x / 4; });
    expect_unary(4 / a, a, div_type, "4 / t " + what, [](double x) { return 4 / x; });
    expect_unary(pow(a, 2), a, dtype, "t ** 2 " + what, [](double x) { return x * x; });
    expect_unary(pow(a, 3), a, dtype, "t ** 3 " + what, [](double x) { return x * x * x; });
  }
  // The scalar is used at full precision in the f32 compute type, then the result is rounded once: rounding
  // 1.0004 to f16 first would give 1 and the product 1000.
  EXPECT_EQ((make({1000}, {1}, DType::F16) * 1.0004).item<float>(), 1000.5f);
  const Tensor u = make({10, 250}, {2}, DType::U8);
  expect_values(u + 300, {54, 38}, "u8 + 300 wraps");
  expect_values(make({1, 2}, {2}, DType::I32) + 2.5, {3.5, 4.5}, "i32 + 2.5");
}

TEST_P(Elementwise, ScalarOperandIsNotCopiedToTheDevice) {
  const Tensor a = make({1, 2, 3}, {3});
  reset_transfer_counters();
  const Tensor r = ((a + 2.0) * 3.0 - 1.0) / 2.0;
  const Tensor q = 1.0 - pow(2.0 / a, 2.0);
  const TransferCounters counters = transfer_counters();
  EXPECT_EQ(counters.host_to_device_copies, 0);
  EXPECT_EQ(counters.host_to_device_bytes, 0);
  expect_values(r, {4, 5.5, 7}, "scalar chain");
  expect_values(q, {-3, 0, 1 - 4.0 / 9}, "scalar chain 2");
}

// --- arithmetic and unary ops against the reference ---

TEST_P(Elementwise, ArithmeticMatchesReferenceInEveryNumericDType) {
  for (DType dtype : {DType::U8, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64}) {
    const Tensor a = make({7, 3, 0, 12, 5, 9}, {2, 3}, dtype), b = make({2, 3, 4}, {3}, dtype);
    const std::string what = fmt::format("{}", dtype);
    expect_binary(add(a, b), a, b, dtype, "add " + what, std::plus<>());
    expect_binary(add(a, b, 3), a, b, dtype, "add alpha " + what, [](double x, double y) { return x + 3 * y; });
    expect_binary(sub(a, b), a, b, dtype, "sub " + what, std::minus<>());
    expect_binary(sub(a, b, 2), a, b, dtype, "sub alpha " + what, [](double x, double y) { return x - 2 * y; });
    expect_binary(mul(a, b), a, b, dtype, "mul " + what, std::multiplies<>());
    expect_binary(pow(a, b), a, b, dtype, "pow " + what, [](double x, double y) { return std::pow(x, y); });
    expect_binary(maximum(a, b), a, b, dtype, "max " + what, [](double x, double y) { return std::max(x, y); });
    expect_binary(minimum(a, b), a, b, dtype, "min " + what, [](double x, double y) { return std::min(x, y); });
    expect_unary(neg(a), a, dtype, "neg " + what, [](double x) { return -x; });
    const Tensor negated = neg(a);
    expect_unary(abs(negated), negated, dtype, "abs " + what, [](double x) { return std::abs(x); });
  }
}

TEST_P(Elementwise, IntegerArithmeticWrapsAndPowHandlesNegativeExponents) {
  const Tensor big = make({2147483647, -2147483648.0}, {2}, DType::I32);
  expect_values(big + make({1, -1}, {2}, DType::I32), {-2147483648.0, 2147483647}, "i32 add wraps");
  expect_values(neg(big), {-2147483647, -2147483648.0}, "neg of INT_MIN wraps");
  const Tensor base = make({2, 1, -1, -1, 0}, {5}, DType::I64);
  expect_values(pow(base, make({-1, -3, -3, -2, 3}, {5}, DType::I64)), {0, 1, -1, 1, 0}, "i64 pow");
  expect_values(make({255, 3}, {2}, DType::U8) * 2, {254, 6}, "u8 mul wraps");
}

TEST_P(Elementwise, UnaryFloatingOpsMatchReference) {
  const std::vector<double> v = {-4, -1.5, -0.25, 0, 0.3, 1, 2.5, 9};
  const auto sigmoid_ref = [](double x) { return 1 / (1 + std::exp(-x)); };
  const auto gelu_ref = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
  for (DType dtype : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    const Tensor a = make(v, {2, 4}, dtype);
    const Tensor pos = make({0.125, 0.5, 1, 2, 3, 7.5, 100, 1000}, {8}, dtype);
    const std::string what = fmt::format("{}", dtype);
    expect_unary(exp(a), a, dtype, "exp " + what, [](double x) { return std::exp(x); });
    expect_unary(tanh(a), a, dtype, "tanh " + what, [](double x) { return std::tanh(x); });
    expect_unary(sigmoid(a), a, dtype, "sigmoid " + what, sigmoid_ref);
    expect_unary(gelu(a), a, dtype, "gelu " + what, gelu_ref);
    expect_unary(relu(a), a, dtype, "relu " + what, [](double x) { return std::max(x, 0.0); });
    expect_unary(log(pos), pos, dtype, "log " + what, [](double x) { return std::log(x); });
    expect_unary(sqrt(pos), pos, dtype, "sqrt " + what, [](double x) { return std::sqrt(x); });
    expect_unary(rsqrt(pos), pos, dtype, "rsqrt " + what, [](double x) { return 1 / std::sqrt(x); });
    expect_unary(pow(pos, 0.5), pos, dtype, "pow 0.5 " + what, [](double x) { return std::sqrt(x); });
  }
}

TEST_P(Elementwise, SpecialValuesFollowIEEE) {
  const Tensor a = make({0, -1, kInf, -kInf, kNaN}, {5});
  expect_values(log(a), {-kInf, kNaN, kInf, kNaN, kNaN}, "log");
  expect_values(sqrt(a), {0, kNaN, kInf, kNaN, kNaN}, "sqrt");
  expect_values(rsqrt(a), {kInf, kNaN, 0, kNaN, kNaN}, "rsqrt");
  expect_values(exp(a), {1, std::exp(-1.0), kInf, 0, kNaN}, "exp");
  expect_values(sigmoid(make({-200, 200}, {2})), {0, 1}, "sigmoid saturates");
  expect_values(relu(a), {0, 0, kInf, 0, kNaN}, "relu keeps NaN");
  expect_values(a / make({0}, {1}), {kNaN, -kInf, kInf, -kInf, kNaN}, "division by zero");
  const Tensor nan_mix = make({kNaN, 1, 2}, {3}), other = make({1, kNaN, 1}, {3});
  expect_values(maximum(nan_mix, other), {kNaN, kNaN, 2}, "maximum propagates NaN");
  expect_values(minimum(nan_mix, other), {kNaN, kNaN, 1}, "minimum propagates NaN");
  expect_values(ne(nan_mix, nan_mix), {1, 0, 0}, "NaN != NaN");
  expect_values(eq(nan_mix, nan_mix), {0, 1, 1}, "NaN == NaN is false");
}

TEST_P(Elementwise, IntegerInputsOfFloatingOpsComputeInF32) {
  const Tensor a = make({0, 1, 4}, {3}, DType::I64);
  expect_unary(exp(a), a, DType::F32, "exp of i64", [](double x) { return std::exp(x); });
  expect_unary(sqrt(a), a, DType::F32, "sqrt of i64", [](double x) { return std::sqrt(x); });
  expect_values(div(a, make({2}, {1}, DType::I32)), {0, 0.5, 2}, "i64 / i32 is true division");
}

TEST_P(Elementwise, ComparisonsComputeInThePromotedDType) {
  const Tensor a = make({1, 2, 3, 4}, {4}), b = make({2, 2, 2, 2}, {4}, DType::I64);
  expect_values(eq(a, b), {0, 1, 0, 0}, "eq");
  expect_values(ne(a, b), {1, 0, 1, 1}, "ne");
  expect_values(lt(a, b), {1, 0, 0, 0}, "lt");
  expect_values(le(a, b), {1, 1, 0, 0}, "le");
  expect_values(gt(a, b), {0, 0, 1, 1}, "gt");
  expect_values(ge(a, b), {0, 1, 1, 1}, "ge");
  expect_values(a >= b, {0, 1, 1, 1}, "operator>=");
  // 2^24 + 1 is not an f32: promoted to f32 it equals 2^24, as in PyTorch.
  EXPECT_TRUE(eq(make({16777217}, {1}, DType::I32), make({16777216}, {1}, DType::F32)).item<bool>());
  EXPECT_FALSE(eq(make({16777217}, {1}, DType::I32), make({16777216}, {1}, DType::I64)).item<bool>());
}

TEST_P(Elementwise, LogicalOpsTreatNonZeroAsTrue) {
  const Tensor a = make({0, -3, kNaN, 0.5}, {4}), b = make({0, 0, 7, 2}, {4}, DType::I32);
  expect_values(logical_and(a, b), {0, 0, 1, 1}, "and");
  expect_values(logical_or(a, b), {0, 1, 1, 1}, "or");
  expect_values(logical_xor(a, b), {0, 1, 0, 0}, "xor");
  expect_values(logical_not(a), {1, 0, 0, 0}, "not");
  EXPECT_EQ(logical_not(b).dtype(), DType::Bool);
}

TEST_P(Elementwise, ClampBoundsAndTypes) {
  const Tensor a = make({-5, -1, 0, 2, 9, kNaN}, {6});
  expect_values(clamp(a, -2, 3), {-2, -1, 0, 2, 3, kNaN}, "both bounds");
  expect_values(clamp(a, 0, std::nullopt), {0, 0, 0, 2, 9, kNaN}, "min only");
  expect_values(clamp(a, std::nullopt, 1.5), {-5, -1, 0, 1.5, 1.5, kNaN}, "max only");
  expect_values(clamp(a, 4, 1), {1, 1, 1, 1, 1, kNaN}, "min above max gives max");
  const Tensor i = make({-5, 0, 300}, {3}, DType::I32);
  EXPECT_EQ(clamp(i, 0, 10).dtype(), DType::I32);
  const Tensor f = clamp(i, 0.5, std::nullopt);
  EXPECT_EQ(f.dtype(), DType::F32);
  expect_values(f, {0.5, 0.5, 300}, "int clamped by a float bound");
  expect_values(clamp(make({0, 7, 255}, {3}, DType::U8), -5, 1000), {0, 7, 255}, "u8 bounds saturate");
  EXPECT_THROW(clamp(a, std::nullopt, std::nullopt), InvalidArgumentError);
  EXPECT_THROW(clamp(make({1}, {1}, DType::Bool), 0, 1), DTypeError);
}

TEST_P(Elementwise, WhereBroadcastsAndPromotes) {
  const Tensor cond = make({1, 0, 1}, {3, 1}, DType::Bool);
  const Tensor a = make({1, 2, 3, 4}, {1, 4}, DType::I32), b = make({-0.5}, {});
  const Tensor r = where(cond, a, b);
  EXPECT_EQ(r.shape(), (Shape{3, 4}));
  EXPECT_EQ(r.dtype(), DType::F32);
  expect_values(r, {1, 2, 3, 4, -0.5, -0.5, -0.5, -0.5, 1, 2, 3, 4}, "where");
  EXPECT_THROW(where(make({1}, {1}, DType::F32), a, b), DTypeError);
}

// --- layouts: broadcasting, strides, zero-size, large ---

TEST_P(Elementwise, BroadcastingFollowsNumpyRules) {
  const Tensor a = make({1, 2, 3}, {3, 1}), b = make({10, 20, 30, 40}, {1, 4});
  expect_binary(a + b, a, b, DType::F32, "[3,1] + [1,4]", std::plus<>());
  const Tensor c = make({1, 2, 3, 4, 5, 6}, {3, 1, 2}), d = make({1, 10, 100, 1000}, {2, 2});
  expect_binary(c * d, c, d, DType::F32, "[3,1,2] * [2,2]", std::multiplies<>());
  const Tensor s = make({7}, {});
  expect_binary(s - d, s, d, DType::F32, "0-d - [2,2]", std::minus<>());
  EXPECT_EQ((s + s).shape(), Shape{});
  try {
    add(make({1, 2, 3, 4, 5, 6}, {2, 3}), make({1, 2}, {2}));
    FAIL() << "no ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("add"), std::string::npos) << message;
    EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
    EXPECT_NE(message.find("[2]"), std::string::npos) << message;
  }
}

TEST_P(Elementwise, NonContiguousInputs) {
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) v[i] = i * 0.5 - 3;
  const Tensor base = make(v, {4, 6});
  const Tensor t(base.storage(), DType::F32, {6, 4}, {1, 6}, 0);        // transpose
  const Tensor stepped(base.storage(), DType::F32, {4, 3}, {6, 2}, 1);  // every second column from 1
  const Tensor row(base.storage(), DType::F32, {6}, {1}, 6);            // the second row
  const Tensor col(base.storage(), DType::F32, {4, 1}, {6, 1}, 5);      // the last column
  expect_binary(t + t, t, t, DType::F32, "transposed + transposed", std::plus<>());
  expect_binary(t * row.view({6, 1}), t, row.view({6, 1}), DType::F32, "transposed * column", std::multiplies<>());
  expect_binary(stepped - col, stepped, col, DType::F32, "strided - broadcast column", std::minus<>());
  expect_binary(maximum(base, row), base, row, DType::F32, "contiguous max broadcast row",
                [](double x, double y) { return std::max(x, y); });
  expect_unary(exp(t), t, DType::F32, "exp of transposed", [](double x) { return std::exp(x); });
  expect_unary(stepped * 2, stepped, DType::F32, "strided * scalar", [](double x) { return x * 2; });
  std::vector<double> expected;
  for (double x : t.to_vector<double>()) expected.push_back(x > 0 ? x : -x);
  expect_values(where(gt(t, make({0}, {})), t, neg(t)), expected, "where on transposed");
}

TEST_P(Elementwise, LargeTensorsSplitAcrossThreads) {
  constexpr int64_t rows = 300, cols = 700;  // above the CPU grain, so the pool runs it
  std::vector<double> v(rows * cols), w(cols);
  for (int64_t i = 0; i < rows * cols; ++i) v[i] = static_cast<double>((i * 37) % 101) - 50;
  for (int64_t j = 0; j < cols; ++j) w[j] = static_cast<double>(j % 13) + 1;
  const Tensor a = make(v, {rows, cols}), b = make(w, {cols});
  expect_binary(a + b, a, b, DType::F32, "large add with broadcast row", std::plus<>());
  expect_binary(a * a, a, a, DType::F32, "large mul", std::multiplies<>());
  const Tensor t = a.transpose(0, 1);
  expect_binary(t - t.contiguous(), t, t, DType::F32, "large transposed sub", std::minus<>());
  expect_unary(tanh(a * 0.01), a * 0.01, DType::F32, "large tanh", [](double x) { return std::tanh(x); });
}

TEST_P(Elementwise, ZeroSizeTensorsGiveEmptyResults) {
  const Tensor empty_rows = make({}, {0, 3}), row = make({1, 2, 3}, {3});
  EXPECT_EQ((empty_rows + row).shape(), (Shape{0, 3}));
  EXPECT_EQ(mul(make({}, {0}), make({5}, {1})).shape(), Shape{0});
  EXPECT_EQ(exp(empty_rows).shape(), (Shape{0, 3}));
  EXPECT_EQ(eq(empty_rows, row).dtype(), DType::Bool);
  EXPECT_EQ((empty_rows * 2.0).numel(), 0);
  EXPECT_EQ(where(make({}, {0}, DType::Bool), make({1}, {1}), make({2}, {1})).shape(), Shape{0});
  Tensor e = make({}, {0, 3});
  add_(e, row);
  relu_(e);
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_THROW(add(make({}, {0}), make({1, 2}, {2})), ShapeError);
}

// --- in place ---

TEST_P(Elementwise, InPlaceOpsWriteSelf) {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3});
  const auto storage = a.storage();
  add_(a, make({10, 20, 30}, {3}), 2);
  expect_values(a, {21, 42, 63, 24, 45, 66}, "add_ with alpha and broadcast");
  sub_(a, make({1}, {1}));
  mul_(a, make({2, 1}, {2, 1}));
  div_(a, make({4}, {}));
  expect_values(a, {10, 20.5, 31, 5.75, 11, 16.25}, "sub_ mul_ div_");
  a -= make({0.25}, {1});
  a *= make({4}, {1});
  expect_values(a, {39, 81, 123, 22, 43, 64}, "operators");
  clamp_(a, 40, 100);
  expect_values(a, {40, 81, 100, 40, 43, 64}, "clamp_");
  Tensor b = a - 50.0;
  relu_(b);
  expect_values(b, {0, 31, 50, 0, 0, 14}, "relu_");
  EXPECT_EQ(a.storage(), storage) << "in-place ops must keep self's memory";
}

TEST_P(Elementwise, InPlaceOnNonContiguousSelfWritesThroughTheView) {
  Tensor base = make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t(base.storage(), DType::F32, {3, 2}, {1, 3}, 0);
  add_(t, make({100, 200}, {2}));
  expect_values(base, {101, 102, 103, 204, 205, 206}, "add_ into a transpose");
  Tensor column(base.storage(), DType::F32, {2}, {3}, 1);
  clamp_(column, std::nullopt, 150);
  expect_values(base, {101, 102, 103, 204, 150, 206}, "clamp_ of a column");
}

TEST_P(Elementwise, InPlaceWithOverlappingOtherReadsTheOldValues) {
  Tensor a = make({1, 2, 3, 4}, {2, 2});
  add_(a, a);
  expect_values(a, {2, 4, 6, 8}, "a += a");
  add_(a, a.transpose(0, 1));
  expect_values(a, {4, 10, 10, 16}, "a += a.t()");
  Tensor b = make({1, 2, 3, 4}, {2, 2});
  mul_(b, b.select(0, 0));
  expect_values(b, {1, 4, 3, 8}, "b *= b[0]");
}

TEST_P(Elementwise, InPlaceComputesInTheResultDTypeThenStores) {
  Tensor h = make({1, 2}, {2}, DType::F16);
  add_(h, make({0.0001, 1000.25}, {2}, DType::F32));
  EXPECT_EQ(h.dtype(), DType::F16);
  expect_values(h, {stored(1.0001, DType::F16), stored(1002.25, DType::F16)}, "f16 += f32");
  Tensor i = make({5, 7}, {2}, DType::I32);
  add_(i, make({3000000000.0, 1}, {2}, DType::I64));
  expect_values(i, {stored(3000000005.0, DType::I32), 8}, "i32 += i64 wraps");
  Tensor flag = make({0, 1}, {2}, DType::Bool);
  add_(flag, make({1, 0}, {2}, DType::Bool));
  expect_values(flag, {1, 1}, "bool += bool is or");
}

TEST_P(Elementwise, InPlaceRejectsResultsThatDoNotFitSelf) {
  Tensor i = make({1, 2}, {2}, DType::I64);
  try {
    div_(i, make({2, 2}, {2}, DType::I64));
    FAIL() << "no DTypeError";
  } catch (const DTypeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("div_"), std::string::npos) << message;
    EXPECT_NE(message.find("f32"), std::string::npos) << message;
    EXPECT_NE(message.find("i64"), std::string::npos) << message;
  }
  EXPECT_THROW(add_(i, make({0.5}, {1})), DTypeError);
  Tensor flag = make({1}, {1}, DType::Bool);
  EXPECT_THROW(add_(flag, make({1}, {1}, DType::I32)), DTypeError);
  EXPECT_THROW(clamp_(i, 0.5, std::nullopt), DTypeError);
  Tensor small = make({1, 2, 3}, {3});
  try {
    mul_(small, make({1, 2, 3, 4, 5, 6}, {2, 3}));
    FAIL() << "no ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("mul_"), std::string::npos) << message;
    EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
  }
  Tensor expanded = make({1, 2}, {2}).expand({3, 2});
  EXPECT_THROW(relu_(expanded), InvalidArgumentError);
  EXPECT_THROW(add_(expanded, make({1}, {1})), InvalidArgumentError);
}

// --- errors ---

TEST_P(Elementwise, InvalidDTypesAreRejectedWithTheOpName) {
  const Tensor flags = make({1, 0}, {2}, DType::Bool), ints = make({1, 2}, {2}, DType::I32);
  const auto message_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const DTypeError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message_of([&] { sub(flags, flags); }).find("sub"), std::string::npos);
  EXPECT_NE(message_of([&] { return flags - 1; }).find("logical"), std::string::npos);
  EXPECT_NE(message_of([&] { neg(flags); }).find("neg"), std::string::npos);
  EXPECT_NE(message_of([&] { add(ints, ints, 0.5); }).find("alpha"), std::string::npos);
  EXPECT_THROW(abs(flags), DTypeError);
  EXPECT_THROW(relu(flags), DTypeError);
  EXPECT_THROW(pow(flags, flags), DTypeError);
  EXPECT_THROW(pow(ints, -1), InvalidArgumentError);
  EXPECT_THROW(add(Tensor(), ints), InvalidArgumentError);
}

TEST_P(Elementwise, DevicesMustMatch) {
  if (!device().is_cpu()) {
    const Tensor here = make({1, 2}, {2}), there = strata::make({1, 2}, {2}, DType::F32, kCPU);
    try {
      add(there, here);
      FAIL() << "no DeviceMismatchError";
    } catch (const DeviceMismatchError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("add"), std::string::npos) << message;
      EXPECT_NE(message.find("argument 1"), std::string::npos) << message;
      EXPECT_NE(message.find(device().str()), std::string::npos) << message;
    }
    Tensor mutable_here = here;
    EXPECT_THROW(mul_(mutable_here, there), DeviceMismatchError);
    EXPECT_THROW(where(make({1, 0}, {2}, DType::Bool), here, there), DeviceMismatchError);
    return;
  }
  // Without a second device: the check itself, on views that name different devices (nothing is registered).
  TensorView cpu_view, gpu_view;
  gpu_view.device = Device(DeviceType::CUDA, 0);
  try {
    ops::check_same_device("add", {&cpu_view, &gpu_view});
    FAIL() << "no DeviceMismatchError";
  } catch (const DeviceMismatchError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("add: argument 0 is on cpu but argument 1 is on cuda:0"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(ops::check_same_device("add", {&cpu_view, &cpu_view}));
}

INSTANTIATE_TEST_SUITE_P(Devices, Elementwise, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
