// clip_grad_norm_ and clip_grad_value_ against hand computations, on every device.
#include "strata/nn/clip_grad.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "test_devices.h"

namespace strata {
namespace {

class ClipGrad : public ::testing::TestWithParam<Device> {
 protected:
  Tensor with_grad(const std::vector<float>& grad) const {
    Tensor p = zeros({static_cast<int64_t>(grad.size())}, TensorOptions(DType::F32).device(GetParam()));
    p.requires_grad_();
    p.set_grad(tensor<float>(grad, {}, GetParam()));
    return p;
  }
};

TEST_P(ClipGrad, NormScalesEveryGradientByTheJointNorm) {
  const Tensor a = with_grad({3, 0}), b = with_grad({0, 4});  // joint 2-norm 5
  const Tensor total = nn::utils::clip_grad_norm_({a, b}, 1.0);
  EXPECT_NEAR(total.item<double>(), 5.0, 1e-6);
  const double k = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(a.grad().to_vector<float>()[0], 3 * k, 1e-6);
  EXPECT_NEAR(b.grad().to_vector<float>()[1], 4 * k, 1e-6);
}

TEST_P(ClipGrad, NormLeavesSmallGradientsAlone) {
  const Tensor a = with_grad({0.3f, -0.4f});
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a}, 1.0).item<double>(), 0.5, 1e-6);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{0.3f, -0.4f}));
}

TEST_P(ClipGrad, NormOfOtherOrdersAndInfinity) {
  const Tensor a = with_grad({1, -2}), b = with_grad({-3});
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a, b}, 100.0, 1.0).item<double>(), 6.0, 1e-6);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a, b}, 1.5, inf).item<double>(), 3.0, 1e-6);
  EXPECT_NEAR(b.grad().item<double>(), -3.0 * 1.5 / (3.0 + 1e-6), 1e-6);
}

TEST_P(ClipGrad, NormSkipsParametersWithoutGradients) {
  Tensor none = zeros({2}, TensorOptions(DType::F32).device(GetParam()));
  none.requires_grad_();
  const Tensor a = with_grad({6, 8});
  EXPECT_NEAR(nn::utils::clip_grad_norm_({none, a}, 5.0).item<double>(), 10.0, 1e-5);
  EXPECT_FALSE(none.grad().defined());
  EXPECT_EQ(nn::utils::clip_grad_norm_({none}, 1.0).item<double>(), 0.0);
  EXPECT_THROW(nn::utils::clip_grad_norm_({a}, -1.0), InvalidArgumentError);
  EXPECT_THROW(nn::utils::clip_grad_norm_({a}, 1.0, 0.0), InvalidArgumentError);
}

TEST_P(ClipGrad, ValueClampsEveryElement) {
  const Tensor a = with_grad({-3, 0.5f, 2});
  nn::utils::clip_grad_value_({a}, 1.0);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{-1, 0.5f, 1}));
  EXPECT_THROW(nn::utils::clip_grad_value_({a}, -1.0), InvalidArgumentError);
}

INSTANTIATE_TEST_SUITE_P(Devices, ClipGrad, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
