// batch_norm and layer_norm: hand-computed values, running statistics, gradients and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/nn/init.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "test_checks.h"
#include "test_devices.h"
#include "test_fixtures.h"

namespace strata {
namespace {

namespace F = nn::functional;
using Inputs = std::vector<Tensor>;
using testing::expect_gradcheck;
using testing::expect_near;

class Normalization : public testing::SeededDeviceTest {};

constexpr double kEps = 1e-5;

// Channel 0 holds 1, 2, 3, 4 (mean 2.5, biased var 1.25, unbiased 5/3); channel 1 holds 2, 4, 6, 8 (mean 5,
// biased var 5, unbiased 20/3).
Tensor two_channels(Device device) { return tensor<float>({1, 2, 2, 4, 3, 6, 4, 8}, {4, 2}, device); }

TEST_P(Normalization, BatchNormTrainingUsesBatchStatistics) {
  const Tensor y = F::batch_norm(two_channels(device()), {}, {}, {}, {}, /*training=*/true);
  const double s0 = std::sqrt(1.25 + kEps), s1 = std::sqrt(5.0 + kEps);
  expect_near(y.to_vector<float>(), {-1.5 / s0, -3 / s1, -0.5 / s0, -1 / s1, 0.5 / s0, 1 / s1, 1.5 / s0, 3 / s1});
}

TEST_P(Normalization, BatchNormAcceptsANonContiguousInput) {
  const Tensor x = tensor<float>({1, 2, 3, 4, 2, 4, 6, 8}, {2, 4}, device()).t();  // two_channels, transposed
  ASSERT_FALSE(x.is_contiguous());
  const Tensor y = F::batch_norm(x, {}, {}, {}, {}, /*training=*/true);
  EXPECT_EQ(y.dtype(), DType::F32);
  EXPECT_EQ(y.to_vector<float>(), F::batch_norm(two_channels(device()), {}, {}, {}, {}, true).to_vector<float>());
  Tensor leaf_t = randn({3, 5}, TensorOptions(DType::F64).device(device())).t();
  leaf_t.requires_grad_();
  expect_gradcheck([](const Inputs& in) { return F::batch_norm(in[0], {}, {}, {}, {}, true); }, {leaf_t});
}

TEST_P(Normalization, BatchNormAppliesWeightAndBias) {
  const Tensor w = tensor<float>({2, 0.5}, {}, device()), b = tensor<float>({1, -1}, {}, device());
  const Tensor y = F::batch_norm(two_channels(device()), {}, {}, w, b, /*training=*/true);
  const double s0 = std::sqrt(1.25 + kEps), s1 = std::sqrt(5.0 + kEps);
  expect_near(y.to_vector<float>(), {1 - 3 / s0, -1 - 1.5 / s1, 1 - 1 / s0, -1 - 0.5 / s1, 1 + 1 / s0, -1 + 0.5 / s1,
                                     1 + 3 / s0, -1 + 1.5 / s1});
}

TEST_P(Normalization, BatchNormUpdatesRunningStatsWithUnbiasedVariance) {
  Tensor rm = zeros({2}, f32()), rv = ones({2}, f32());
  F::batch_norm(two_channels(device()), rm, rv, {}, {}, /*training=*/true, /*momentum=*/0.1);
  expect_near(rm.to_vector<float>(), {0.25, 0.5});
  expect_near(rv.to_vector<float>(), {0.9 + 0.1 * 5.0 / 3.0, 0.9 + 0.1 * 20.0 / 3.0});
  F::batch_norm(two_channels(device()), rm, rv, {}, {}, /*training=*/true, /*momentum=*/0.5);
  expect_near(rm.to_vector<float>(), {0.5 * 0.25 + 0.5 * 2.5, 0.5 * 0.5 + 0.5 * 5});
}

TEST_P(Normalization, BatchNormInferenceUsesRunningStats) {
  const Tensor rm = tensor<float>({1, -2}, {}, device()), rv = tensor<float>({4, 0.25}, {}, device());
  const Tensor w = tensor<float>({3, 1}, {}, device()), b = tensor<float>({0.5, 0}, {}, device());
  const Tensor x = tensor<float>({1, 2, 5, 0}, {2, 2}, device());
  const Tensor y = F::batch_norm(x, rm, rv, w, b, /*training=*/false);
  const double s0 = std::sqrt(4 + kEps), s1 = std::sqrt(0.25 + kEps);
  expect_near(y.to_vector<float>(), {0.5, 4 / s1, 0.5 + 3 * 4 / s0, 2 / s1});
  EXPECT_EQ(rm.to_vector<float>(), (std::vector<float>{1, -2})) << "inference leaves the running stats alone";
}

TEST_P(Normalization, BatchNorm4DReducesOverBatchAndSpace) {
  // [N=2, C=2, H=1, W=2]: channel 0 holds 1, 3, 5, 7 (mean 4, var 5); channel 1 holds 10..40 (mean 25, var 125).
  const Tensor x = tensor<float>({1, 3, 10, 20, 5, 7, 30, 40}, {2, 2, 1, 2}, device());
  Tensor rm = zeros({2}, f32()), rv = ones({2}, f32());
  const Tensor y = F::batch_norm(x, rm, rv, {}, {}, /*training=*/true, /*momentum=*/1.0);
  EXPECT_EQ(y.shape(), x.shape());
  const double s0 = std::sqrt(5 + kEps), s1 = std::sqrt(125 + kEps);
  expect_near(y.to_vector<float>(), {-3 / s0, -1 / s0, -15 / s1, -5 / s1, 1 / s0, 3 / s0, 5 / s1, 15 / s1});
  expect_near(rm.to_vector<float>(), {4, 25});
  expect_near(rv.to_vector<float>(), {20.0 / 3.0, 500.0 / 3.0}, 1e-4);
}

TEST_P(Normalization, BatchNormGradients) {
  const Tensor w = leaf({3}), b = leaf({3});
  expect_gradcheck([](const Inputs& x) { return F::batch_norm(x[0], {}, {}, x[1], x[2], true); }, {leaf({4, 3}), w, b});
  expect_gradcheck([](const Inputs& x) { return F::batch_norm(x[0], {}, {}, x[1], x[2], true); },
                   {leaf({2, 3, 2, 2}), w, b});
  expect_gradcheck([](const Inputs& x) { return F::batch_norm(x[0], {}, {}, {}, {}, true); }, {leaf({3, 3, 2})});
  expect_gradcheck([](const Inputs& x) { return F::batch_norm(x[0], {}, {}, {}, x[1], true); }, {leaf({3, 3, 2}), b});
  // Only the affine parameters require grad (a frozen input), with running statistics being updated.
  const Tensor frozen = randn({4, 3, 2}, TensorOptions(DType::F64).device(device()));
  const Tensor stats_mean = zeros({3}, TensorOptions(DType::F64).device(device()));
  const Tensor stats_var = ones({3}, TensorOptions(DType::F64).device(device()));
  expect_gradcheck([&](const Inputs& x) { return F::batch_norm(frozen, stats_mean, stats_var, x[0], x[1], true); },
                   {w, b});
  const TensorOptions f64 = TensorOptions(DType::F64).device(device());
  const Tensor rm = randn({3}, f64), rv = rand({3}, f64) + 0.5;
  expect_gradcheck([rm, rv](const Inputs& x) { return F::batch_norm(x[0], rm, rv, x[1], x[2], false); },
                   {leaf({2, 3, 2}), w, b});
}

TEST_P(Normalization, BatchNormRejectsBadArguments) {
  const Tensor x = zeros({4, 3}, f32());
  EXPECT_THROW(F::batch_norm(zeros({4}, f32()), {}, {}, {}, {}, true), ShapeError);
  EXPECT_THROW(F::batch_norm(zeros({4, 3}, TensorOptions(DType::I64).device(device())), {}, {}, {}, {}, true),
               DTypeError);
  EXPECT_THROW(F::batch_norm(x, {}, {}, zeros({4}, f32()), {}, true), ShapeError);
  EXPECT_THROW(F::batch_norm(x, {}, {}, {}, zeros({3, 1}, f32()), true), ShapeError);
  EXPECT_THROW(F::batch_norm(x, zeros({2}, f32()), ones({3}, f32()), {}, {}, true), ShapeError);
  EXPECT_THROW(F::batch_norm(x, zeros({3}, f32()), {}, {}, {}, true), InvalidArgumentError);
  EXPECT_THROW(F::batch_norm(x, {}, {}, {}, {}, /*training=*/false), InvalidArgumentError);
  EXPECT_THROW(F::batch_norm(zeros({1, 3}, f32()), {}, {}, {}, {}, true), InvalidArgumentError);
  EXPECT_THROW(F::batch_norm(x, {}, {}, {}, {}, true, 0.1, /*eps=*/-1), InvalidArgumentError);
  try {
    F::batch_norm(x, {}, {}, zeros({4}, f32()), {}, true);
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("batch_norm: weight"), std::string::npos) << e.what();
  }
}

TEST_P(Normalization, LayerNormNormalisesTrailingDims) {
  // Rows [1, 2, 3] and [2, 4, 6]: means 2 and 4, biased variances 2/3 and 8/3.
  const Tensor x = tensor<float>({1, 2, 3, 2, 4, 6}, {2, 3}, device());
  const double s0 = std::sqrt(2.0 / 3.0 + kEps), s1 = std::sqrt(8.0 / 3.0 + kEps);
  expect_near(F::layer_norm(x, {3}).to_vector<float>(), {-1 / s0, 0, 1 / s0, -2 / s1, 0, 2 / s1});
  const Tensor w = tensor<float>({1, 2, 3}, {}, device()), b = tensor<float>({0, 1, -1}, {}, device());
  expect_near(F::layer_norm(x, {3}, w, b).to_vector<float>(), {-1 / s0, 1, -1 + 3 / s0, -2 / s1, 1, -1 + 6 / s1});
  // Over both dims: the six values have mean 3 and biased variance 8/3.
  const double s = std::sqrt(8.0 / 3.0 + kEps);
  expect_near(F::layer_norm(x, {2, 3}).to_vector<float>(), {-2 / s, -1 / s, 0, -1 / s, 1 / s, 3 / s});
}

TEST_P(Normalization, LayerNormGradients) {
  expect_gradcheck([](const Inputs& x) { return F::layer_norm(x[0], {4}, x[1], x[2]); },
                   {leaf({3, 4}), leaf({4}), leaf({4})});
  expect_gradcheck(
      [](const Inputs& x) {
        return F::layer_norm(x[0], {3, 2}, x[1], x[2]);
      },
      {leaf({2, 3, 2}), leaf({3, 2}), leaf({3, 2})});
  expect_gradcheck([](const Inputs& x) { return F::layer_norm(x[0], {3}); }, {leaf({2, 2, 3})});
}

TEST_P(Normalization, LayerNormRejectsBadArguments) {
  const Tensor x = zeros({2, 3}, f32());
  EXPECT_THROW(F::layer_norm(x, {2}), ShapeError);
  EXPECT_THROW(F::layer_norm(x, {4, 2, 3}), ShapeError);
  EXPECT_THROW(F::layer_norm(x, {}), ShapeError);
  EXPECT_THROW(F::layer_norm(x, {3}, zeros({2}, f32())), ShapeError);
  EXPECT_THROW(F::layer_norm(x, {3}, {}, zeros({3, 1}, f32())), ShapeError);
  EXPECT_THROW(F::layer_norm(zeros({2, 3}, TensorOptions(DType::I32).device(device())), {3}), DTypeError);
  try {
    F::layer_norm(x, {2});
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("layer_norm"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Normalization, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

TEST(NormalizationArguments, BatchNormMomentumOutsideZeroOneIsRefused) {
  namespace F = nn::functional;
  const Tensor x = ones({4, 2});
  const Tensor mean = zeros({2}), var = ones({2});
  EXPECT_THROW(F::batch_norm(x, mean, var, {}, {}, true, std::nan(""), 1e-5), InvalidArgumentError);
  EXPECT_THROW(F::batch_norm(x, mean, var, {}, {}, true, 1.5, 1e-5), InvalidArgumentError);
  EXPECT_NO_THROW(F::batch_norm(x, mean, var, {}, {}, true, 0.1, 1e-5));
}

TEST(InitArguments, InfiniteBoundsAreRefused) {
  Tensor t = zeros({3});
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THROW(nn::init::uniform_(t, 0.0, inf), InvalidArgumentError);
  EXPECT_THROW(nn::init::normal_(t, 0.0, inf), InvalidArgumentError);
  EXPECT_THROW(nn::init::normal_(t, std::nan(""), 1.0), InvalidArgumentError);
}

}  // namespace
}  // namespace strata
