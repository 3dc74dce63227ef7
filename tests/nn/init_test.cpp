// Initialisers: bounds, moments, fans and gains, seeding, and every device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/init.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

namespace init = nn::init;

std::vector<double> values(const Tensor& t) { return t.cpu().to(DType::F64).contiguous().to_vector<double>(); }

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double std_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

class InitOnDevice : public ::testing::TestWithParam<Device> {
 protected:
  Tensor make(const Shape& shape, DType dtype = DType::F32) { return empty(shape, TensorOptions(dtype).device(GetParam())); }
};

TEST_P(InitOnDevice, UniformStaysInItsBounds) {
  const auto v = values(init::uniform_(make({100, 100}), -0.5, 1.5));
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -0.5);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.5);
  EXPECT_NEAR(mean_of(v), 0.5, 0.02);
}

TEST_P(InitOnDevice, NormalHasItsMoments) {
  const auto v = values(init::normal_(make({100, 100}, DType::F64), 2.0, 0.5));
  EXPECT_NEAR(mean_of(v), 2.0, 0.02);
  EXPECT_NEAR(std_of(v), 0.5, 0.02);
}

TEST_P(InitOnDevice, ConstantZerosOnes) {
  EXPECT_EQ(values(init::constant_(make({3}), 2.5)), (std::vector<double>{2.5, 2.5, 2.5}));
  EXPECT_EQ(values(init::zeros_(make({2}))), (std::vector<double>{0, 0}));
  EXPECT_EQ(values(init::ones_(make({2}, DType::F16))), (std::vector<double>{1, 1}));
}

TEST_P(InitOnDevice, XavierUniformBound) {
  // fan_in = 20 * 9, fan_out = 10 * 9: bound = sqrt(6 / 270).
  const double bound = std::sqrt(6.0 / 270.0);
  const auto v = values(init::xavier_uniform_(make({10, 20, 3, 3})));
  EXPECT_LE(*std::max_element(v.begin(), v.end()), bound);
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -bound);
  EXPECT_GT(*std::max_element(v.begin(), v.end()), 0.9 * bound);
}

TEST_P(InitOnDevice, XavierNormalStd) {
  const auto v = values(init::xavier_normal_(make({200, 300}), 2.0));
  EXPECT_NEAR(std_of(v), 2.0 * std::sqrt(2.0 / 500.0), 0.003);
}

TEST_P(InitOnDevice, KaimingUniformBoundByFanMode) {
  // relu gain sqrt(2): bound = sqrt(2) * sqrt(3 / fan).
  const auto in = values(init::kaiming_uniform_(make({50, 200}), 0.0, init::FanMode::FanIn, init::Nonlinearity::ReLU));
  EXPECT_LE(*std::max_element(in.begin(), in.end()), std::sqrt(6.0 / 200.0));
  EXPECT_GT(*std::max_element(in.begin(), in.end()), 0.9 * std::sqrt(6.0 / 200.0));
  const auto out = values(init::kaiming_uniform_(make({50, 200}), 0.0, init::FanMode::FanOut, init::Nonlinearity::ReLU));
  EXPECT_GT(*std::max_element(out.begin(), out.end()), 0.9 * std::sqrt(6.0 / 50.0));
}

TEST_P(InitOnDevice, KaimingNormalStd) {
  const auto v = values(init::kaiming_normal_(make({100, 400}), 0.0, init::FanMode::FanIn, init::Nonlinearity::ReLU));
  EXPECT_NEAR(std_of(v), std::sqrt(2.0 / 400.0), 0.002);
}

TEST_P(InitOnDevice, SeededThroughTheDeviceGenerator) {
  manual_seed(42);
  const auto a = values(init::normal_(make({16})));
  manual_seed(42);
  const auto b = values(init::normal_(make({16})));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, values(init::normal_(make({16}))));
}

TEST_P(InitOnDevice, DoesNotRecordAutograd) {
  Tensor w = make({4, 4});
  w.requires_grad_();
  init::kaiming_uniform_(w, std::sqrt(5.0));
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
}

INSTANTIATE_TEST_SUITE_P(Devices, InitOnDevice, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

TEST(Init, GainsMatchPyTorch) {
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Linear), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Tanh), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::ReLU), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::LeakyReLU, std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
}

TEST(Init, FansOfAConvWeight) {
  const auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(empty({16, 8, 3, 5}));
  EXPECT_EQ(fan_in, 8 * 15);
  EXPECT_EQ(fan_out, 16 * 15);
  EXPECT_THROW(init::calculate_fan_in_and_fan_out(empty({4})), ShapeError);
}

TEST(Init, RejectsIntegerTensors) { EXPECT_THROW(init::uniform_(zeros({2}, DType::I64)), DTypeError); }

}  // namespace
}  // namespace strata
