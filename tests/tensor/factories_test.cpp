#include "strata/tensor/factories.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "strata/backends/portable/philox.h"
#include "strata/core/error.h"
#include "strata/runtime/cuda.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "test_devices.h"

namespace strata {
namespace {

template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

struct Moments {
  double mean = 0, var = 0, min = 0, max = 0;
};

Moments moments_of(const std::vector<double>& v) {
  Moments m;
  m.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(v.size() - 1);
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  return m;
}

class Factories : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  TensorOptions on(DType dtype) const { return TensorOptions(dtype).device(device()); }
};

// --- empty ---

TEST_P(Factories, EmptyRefusesShapesWhoseSizeDoesNotFitIn64Bits) {
  // 2^62 floats are 2^64 bytes: a wrapped byte count would allocate nothing for a tensor said to be huge.
  EXPECT_CONTAINS(error_of<ShapeError>([&] { (void)empty({int64_t{1} << 62}, on(DType::F32)); }),
                  "does not fit in 64 bits");
  EXPECT_THROW((void)empty({int64_t{1} << 32, int64_t{1} << 32}, on(DType::U8)), ShapeError);
  // No elements, but the first dimension's stride would be 2^64.
  EXPECT_THROW((void)empty({0, int64_t{1} << 62, 4}, on(DType::U8)), ShapeError);
  EXPECT_EQ(empty({0, int64_t{1} << 40}, on(DType::F32)).numel(), 0);
}

TEST(FactoriesFromHostValues, CountAndPointerAreChecked) {
  EXPECT_CONTAINS(error_of<ShapeError>([] {
                    (void)tensor<float>({1.f, 2.f, 3.f}, {2, 2});
                  }),
                  "3 values do not fill shape [2, 2]");
  EXPECT_THROW((void)tensor<float>({1, 2, 3, 4, 5}, {2, 2}), ShapeError);
  EXPECT_CONTAINS(error_of<InvalidArgumentError>([] { (void)from_blob(nullptr, {3}, DType::F32); }), "data is null");
  EXPECT_EQ(from_blob(nullptr, {0}, DType::F32).numel(), 0);
}

TEST(FactoriesFill, ValuesAnIntegerTensorCannotHoldAreRefused) {
  EXPECT_CONTAINS(
      error_of<InvalidArgumentError>([] { (void)full({2}, std::numeric_limits<double>::quiet_NaN(), DType::I64); }),
      "value nan cannot be converted to i64 without overflow");
  EXPECT_THROW((void)full({2}, 1e20, DType::I32), InvalidArgumentError);
  EXPECT_THROW((void)full({2}, 300, DType::U8), InvalidArgumentError);
  EXPECT_THROW((void)full({2}, -1, DType::U8), InvalidArgumentError);
  EXPECT_EQ(full({1}, 255, DType::U8).to_vector<uint8_t>(), (std::vector<uint8_t>{255}));
  EXPECT_EQ(full({1}, -2.5, DType::I64).to_vector<int64_t>(), (std::vector<int64_t>{-2}));
  // Scalar's own conversion saturates instead of being undefined.
  EXPECT_EQ(Scalar(std::numeric_limits<double>::quiet_NaN()).to_int(), 0);
  EXPECT_EQ(Scalar(1e30).to_int(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Scalar(-1e30).to_int(), std::numeric_limits<int64_t>::min());
}

// --- arange ---

TEST_P(Factories, ArangeCountsFromStartBelowEnd) {
  const Tensor a = arange(5, on(DType::I64));
  EXPECT_EQ(a.dtype(), DType::I64);
  EXPECT_EQ(a.device(), device());
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1, 10, 3, on(DType::I64)).to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(arange(5, 0, -2, on(DType::I32)).to_vector<int32_t>(), (std::vector<int32_t>{5, 3, 1}));
  EXPECT_EQ(arange(-3, 3, 2, on(DType::I64)).to_vector<int64_t>(), (std::vector<int64_t>{-3, -1, 1}));
  EXPECT_EQ(arange(4, 4, 1, on(DType::I64)).numel(), 0);
  EXPECT_EQ(arange(3).dtype(), DType::I64);  // the default dtype
}

TEST_P(Factories, ArangeWithFloatStepHasCeilOfTheRatioElements) {
  EXPECT_EQ(arange(0, 1, 0.25, on(DType::F32)).to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  const std::vector<double> v = arange(0, 1, 0.3, on(DType::F64)).to_vector<double>();  // ceil(3.33) = 4
  ASSERT_EQ(v.size(), 4u);
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_DOUBLE_EQ(v[i], 0.3 * static_cast<double>(i));
  EXPECT_EQ(arange(1.0, -1.0, -0.5, on(DType::F16)).to_vector<float>(), (std::vector<float>{1, 0.5f, 0, -0.5f}));
  EXPECT_EQ(arange(0.0, 3.0, 1.0, on(DType::I64)).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
}

TEST_P(Factories, ArangeRejectsBadSteps) {
  EXPECT_CONTAINS(error_of<InvalidArgumentError>([&] { arange(0, 5, 0, on(DType::I64)); }), "non-zero");
  const std::string sign = error_of<InvalidArgumentError>([&] { arange(0, 5, -1, on(DType::I64)); });
  EXPECT_CONTAINS(sign, "step -1");
  EXPECT_CONTAINS(sign, "end 5");
  EXPECT_THROW(arange(5.0, 0.0, 0.5, on(DType::F32)), InvalidArgumentError);
  EXPECT_CONTAINS(error_of<DTypeError>([&] { arange(0, 1, 0.1, on(DType::I64)); }), "floating dtype");
  EXPECT_CONTAINS(error_of<InvalidArgumentError>([&] { arange(250, 260, 1, on(DType::U8)); }), "u8");
  EXPECT_THROW(arange(0, 2, 1, on(DType::Bool)), DTypeError);
  EXPECT_THROW(arange(0, std::nan(""), 1, on(DType::F32)), InvalidArgumentError);
  // 2^63 is no int64: a float range reaching it must not wrap to INT64_MIN.
  EXPECT_THROW(arange(0.0, 0x1p64, 0x1p63, on(DType::I64)), InvalidArgumentError);
}

TEST(FactoriesData, TheElementTypeMustBeTheDtypes) {
  const Tensor f = zeros({2});
  EXPECT_CONTAINS(error_of<DTypeError>([&] { (void)f.data<double>(); }), "holds f32 but T is the type of f64");
  EXPECT_NO_THROW((void)f.data<const float>());
  EXPECT_NO_THROW((void)ones({2}, DType::Bool).data<uint8_t>());  // bool tensors' bytes
}

// --- linspace and eye ---

TEST_P(Factories, LinspaceIncludesBothEnds) {
  EXPECT_EQ(linspace(0, 1, 5, on(DType::F32)).to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1}));
  const std::vector<double> v = linspace(0.1, 0.7, 7, on(DType::F64)).to_vector<double>();
  ASSERT_EQ(v.size(), 7u);
  EXPECT_EQ(v.front(), 0.1);
  EXPECT_EQ(v.back(), 0.7);  // exact: the second half counts back from end
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], 0.1 + 0.1 * static_cast<double>(i), 1e-15);
  EXPECT_EQ(linspace(3, -3, 4, on(DType::F32)).to_vector<float>(), (std::vector<float>{3, 1, -1, -3}));
  EXPECT_EQ(linspace(2, 9, 1, on(DType::F32)).to_vector<float>(), (std::vector<float>{2}));
  EXPECT_EQ(linspace(2, 9, 0, on(DType::F32)).numel(), 0);
  EXPECT_EQ(linspace(0, 10, 4, on(DType::I64)).to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 6, 10}));
  EXPECT_THROW(linspace(0, 1, -1), InvalidArgumentError);
}

TEST_P(Factories, EyeHasOnesOnTheDiagonal) {
  EXPECT_EQ(eye(3, -1, on(DType::F32)).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  const Tensor wide = eye(2, 3, on(DType::I64));
  EXPECT_EQ(wide.shape(), (Shape{2, 3}));
  EXPECT_EQ(wide.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(eye(3, 2, on(DType::Bool)).to_vector<bool>(), (std::vector<bool>{true, false, false, true, false, false}));
  EXPECT_EQ(eye(0, -1, on(DType::F32)).shape(), (Shape{0, 0}));
  EXPECT_THROW(eye(-1), InvalidArgumentError);
  EXPECT_THROW(eye(2, -3), InvalidArgumentError);
}

// --- random ---

TEST_P(Factories, SameSeedGivesTheSameNumbers) {
  manual_seed(42);
  const std::vector<float> a = rand({1000}, on(DType::F32)).to_vector<float>();
  const std::vector<float> next = rand({1000}, on(DType::F32)).to_vector<float>();
  manual_seed(42);
  EXPECT_EQ(rand({1000}, on(DType::F32)).to_vector<float>(), a);
  EXPECT_EQ(rand({1000}, on(DType::F32)).to_vector<float>(), next);
  EXPECT_NE(a, next);  // the generator moved on
  manual_seed(43);
  EXPECT_NE(rand({1000}, on(DType::F32)).to_vector<float>(), a);
}

TEST_P(Factories, AValueDependsOnlyOnSeedOffsetAndIndex) {
  manual_seed(7);
  const std::vector<double> short_draw = randn({7}, on(DType::F64)).to_vector<double>();
  manual_seed(7);
  const std::vector<double> long_draw = randn({4, 5}, on(DType::F64)).to_vector<double>();
  EXPECT_EQ(std::vector<double>(long_draw.begin(), long_draw.begin() + 7), short_draw);
  // 20 f64 values take 10 Philox blocks (two values each).
  EXPECT_EQ(default_generator(device()).state().offset, 10u);
  EXPECT_EQ(default_generator(device()).seed(), 7u);
}

TEST_P(Factories, GeneratorStateCanBeSavedAndRestored) {
  manual_seed(11);
  rand({5}, on(DType::F32));
  const GeneratorState saved = default_generator(device()).state();
  const std::vector<float> a = rand({50}, on(DType::F32)).to_vector<float>();
  default_generator(device()).set_state(saved);
  EXPECT_EQ(rand({50}, on(DType::F32)).to_vector<float>(), a);
}

TEST_P(Factories, RandIsUniformInZeroOne) {
  manual_seed(1);
  for (DType dtype : {DType::F32, DType::F64}) {
    const Moments m = moments_of(rand({100000}, on(dtype)).to_vector<double>());
    EXPECT_NEAR(m.mean, 0.5, 0.005) << dtype;  // standard error 0.0009
    EXPECT_NEAR(m.var, 1.0 / 12, 0.002) << dtype;
    EXPECT_GE(m.min, 0.0) << dtype;
    EXPECT_LT(m.max, 1.0) << dtype;
    EXPECT_LT(m.min, 1e-3) << dtype;
    EXPECT_GT(m.max, 1 - 1e-3) << dtype;
  }
  for (DType dtype : {DType::F16, DType::BF16}) {  // coarse types never round up to 1
    const Moments m = moments_of(rand({100000}, on(dtype)).to_vector<double>());
    EXPECT_NEAR(m.mean, 0.5, 0.01) << dtype;
    EXPECT_GE(m.min, 0.0) << dtype;
    EXPECT_LT(m.max, 1.0) << dtype;
  }
}

TEST_P(Factories, RandnIsStandardNormal) {
  manual_seed(2);
  for (DType dtype : {DType::F32, DType::F64, DType::BF16}) {
    const std::vector<double> v = randn({100000}, on(dtype)).to_vector<double>();
    const Moments m = moments_of(v);
    EXPECT_NEAR(m.mean, 0.0, 0.02) << dtype;  // standard error 0.003
    EXPECT_NEAR(m.var, 1.0, 0.03) << dtype;
    const auto within_one = std::count_if(v.begin(), v.end(), [](double x) { return std::abs(x) < 1.0; });
    EXPECT_NEAR(static_cast<double>(within_one) / static_cast<double>(v.size()), 0.6827, 0.01) << dtype;
    const auto beyond_three = std::count_if(v.begin(), v.end(), [](double x) { return std::abs(x) > 3.0; });
    EXPECT_NEAR(static_cast<double>(beyond_three) / static_cast<double>(v.size()), 0.0027, 0.001) << dtype;
  }
}

TEST_P(Factories, RandintStaysInItsRangeAndCoversIt) {
  manual_seed(3);
  const Tensor t = randint(-3, 4, {10000}, on(DType::I64));
  EXPECT_EQ(t.dtype(), DType::I64);
  const std::vector<int64_t> v = t.to_vector<int64_t>();
  EXPECT_EQ(std::set<int64_t>(v.begin(), v.end()), (std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3}));
  std::vector<double> as_double(v.begin(), v.end());
  EXPECT_NEAR(moments_of(as_double).mean, 0.0, 0.1);
  const std::vector<uint8_t> bytes = randint(250, 256, {1000}, on(DType::U8)).to_vector<uint8_t>();
  EXPECT_EQ(*std::min_element(bytes.begin(), bytes.end()), 250);
  EXPECT_EQ(*std::max_element(bytes.begin(), bytes.end()), 255);
  const std::vector<float> floats = randint(0, 10, {1000}, on(DType::F32)).to_vector<float>();
  for (float x : floats) ASSERT_EQ(x, std::floor(x));
}

TEST_P(Factories, RandomArgumentsAreChecked) {
  EXPECT_CONTAINS(error_of<InvalidArgumentError>([&] { randint(5, 5, {3}, on(DType::I64)); }), "low (5)");
  EXPECT_CONTAINS(error_of<InvalidArgumentError>([&] { randint(0, 300, {3}, on(DType::U8)); }), "u8");
  EXPECT_CONTAINS(error_of<DTypeError>([&] { rand({3}, on(DType::I64)); }), "rand: expected a floating dtype");
  EXPECT_THROW(randn({3}, on(DType::Bool)), DTypeError);
  EXPECT_EQ(rand({0, 4}, on(DType::F32)).numel(), 0);
}

INSTANTIATE_TEST_SUITE_P(Devices, Factories, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

// --- the same numbers on every device ---

TEST(RandomAcrossDevices, CpuAndCudaGiveIdenticalNumbersForTheSameSeed) {
  STRATA_SKIP_WITHOUT_CUDA();
  const Device gpu(DeviceType::CUDA, 0);
  const Shape shape{100003};  // not a multiple of the values per block
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    manual_seed(1234);
    const Tensor cpu_uniform = rand(shape, dtype);
    const Tensor cpu_normal = randn(shape, dtype);
    const Tensor gpu_uniform = rand(shape, TensorOptions(dtype).device(gpu));
    const Tensor gpu_normal = randn(shape, TensorOptions(dtype).device(gpu));
    // Bitwise equality: compare the raw 64-bit images of the values.
    EXPECT_EQ(cpu_uniform.to_vector<double>(), gpu_uniform.to_vector<double>()) << dtype;
    EXPECT_EQ(cpu_normal.to_vector<double>(), gpu_normal.to_vector<double>()) << dtype;
  }
  manual_seed(99);
  EXPECT_EQ(randint(-1000000, 1000000, shape).to_vector<int64_t>(),
            randint(-1000000, 1000000, shape, TensorOptions(DType::I64).device(gpu)).to_vector<int64_t>());
  EXPECT_EQ(arange(0, 1, 0.001, DType::F64).to_vector<double>(),
            arange(0, 1, 0.001, TensorOptions(DType::F64).device(gpu)).to_vector<double>());
  EXPECT_EQ(linspace(-1, 1, 999, DType::F64).to_vector<double>(),
            linspace(-1, 1, 999, TensorOptions(DType::F64).device(gpu)).to_vector<double>());
}

// --- the portable pieces behind random numbers ---

TEST(Philox, MatchesTheRandom123KnownAnswers) {
  using portable::PhiloxBlock;
  const auto run = [](PhiloxBlock ctr, std::uint32_t k0, std::uint32_t k1) {
    const PhiloxBlock out = portable::philox4x32_10(ctr, k0, k1);
    return std::vector<std::uint32_t>(out.w, out.w + 4);
  };
  EXPECT_EQ(run({{0, 0, 0, 0}}, 0, 0), (std::vector<std::uint32_t>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(run({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff),
            (std::vector<std::uint32_t>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(run({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0),
            (std::vector<std::uint32_t>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, PortableLogAndSinCosAreAccurate) {
  for (double x = 1e-16; x <= 1.0; x *= 1.0137) {
    EXPECT_NEAR(portable::portable_log(x), std::log(x), 1e-15 * std::abs(std::log(x))) << x;
  }
  EXPECT_EQ(portable::portable_log(1.0), 0.0);
  for (int i = 0; i < 4096; ++i) {
    const double v = i / 4096.0 + (i % 3) / 16384.0;
    double s, c;
    portable::portable_sincos_2pi(v, s, c);
    // The reference itself rounds 2 pi v, by up to 4e-16 * 2 pi.
    EXPECT_NEAR(s, std::sin(2 * M_PI * v), 4e-15) << v;
    EXPECT_NEAR(c, std::cos(2 * M_PI * v), 4e-15) << v;
  }
}

}  // namespace
}  // namespace strata
