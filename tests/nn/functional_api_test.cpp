// The functional API as LibTorch users write it: ignore_index in the class losses, batch_norm without running
// statistics, weight or bias, and the options structs next to the positional form.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/nn/functional_options.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "test_checks.h"
#include "test_devices.h"
#include "test_fixtures.h"

namespace strata {
namespace {

namespace F = nn::functional;
using F::Reduction;
using Inputs = std::vector<Tensor>;
using testing::expect_gradcheck;
using testing::expect_near;

class FunctionalApi : public testing::SeededDeviceTest {
 protected:
  Tensor labels(const std::vector<int64_t>& values, const Shape& shape = {}) const {
    return tensor<int64_t>(values, shape, device());
  }
  Tensor logits() const { return tensor<float>({1, 2, 3, 1, 0, -1, 0.5, 0.5, -2}, {3, 3}, device()); }
};

TEST_P(FunctionalApi, CrossEntropyIgnoresMinus100ByDefault) {
  // Row 1 is ignored: the losses are those of rows 0 and 2 alone, and the mean is over those two.
  const Tensor none = F::cross_entropy(logits(), labels({2, -100, 1}), Reduction::None);
  const std::vector<float> per_row = none.to_vector<float>();
  EXPECT_EQ(per_row[1], 0.0f);
  const std::vector<float> kept = F::cross_entropy(logits(), labels({2, 0, 1}), Reduction::None).to_vector<float>();
  EXPECT_NEAR(per_row[0], kept[0], 1e-6);
  EXPECT_NEAR(per_row[2], kept[2], 1e-6);
  EXPECT_NEAR(F::cross_entropy(logits(), labels({2, -100, 1})).item<double>(), (kept[0] + kept[2]) / 2.0, 1e-5);
  EXPECT_NEAR(F::cross_entropy(logits(), labels({2, -100, 1}), Reduction::Sum).item<double>(), kept[0] + kept[2], 1e-5);
}

TEST_P(FunctionalApi, CrossEntropyIgnoredRowsGetNoGradient) {
  Tensor x = logits();
  x.requires_grad_();
  F::cross_entropy(x, labels({2, -100, 1})).backward();
  const std::vector<float> g = x.grad().to_vector<float>();
  EXPECT_EQ(g[3], 0.0f);
  EXPECT_EQ(g[4], 0.0f);
  EXPECT_EQ(g[5], 0.0f);
  // Rows 0 and 2: (softmax - onehot) / 2, the count of kept rows.
  for (const int row : {0, 2}) {
    const float* r = &g[static_cast<std::size_t>(row) * 3];
    EXPECT_NEAR(r[0] + r[1] + r[2], 0.0, 1e-6);
  }
  const std::vector<double> row0{1, 2, 3};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(g[2], (std::exp(row0[2]) / z - 1.0) / 2.0, 1e-6);
}

TEST_P(FunctionalApi, CrossEntropyGradientsWithIgnoredTargets) {
  const Tensor t2 = labels({1, 7, 3, 7}), t3 = labels({0, -100, 1, 1, 2, -100}, {2, 3});
  for (const Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    for (const double ls : {0.0, 0.3}) {
      SCOPED_TRACE(::testing::Message() << "reduction " << static_cast<int>(r) << ", label_smoothing " << ls);
      expect_gradcheck([&](const Inputs& x) { return F::cross_entropy(x[0], t2, r, ls, 7); }, {leaf({4, 4})});
      expect_gradcheck([&](const Inputs& x) { return F::cross_entropy(x[0], t3, r, ls); }, {leaf({2, 3, 3})});
    }
  }
}

TEST_P(FunctionalApi, CrossEntropyOfOnlyIgnoredTargetsIsNaNAsInPyTorch) {
  EXPECT_TRUE(std::isnan(F::cross_entropy(logits(), labels({-100, -100, -100})).item<double>()));
  EXPECT_EQ(F::cross_entropy(logits(), labels({-100, -100, -100}), Reduction::Sum).item<double>(), 0.0);
}

TEST_P(FunctionalApi, CrossEntropyOtherOutOfRangeTargetsStillAssert) {
  const std::string message = assert_message([&] { F::cross_entropy(logits(), labels({2, -100, -1})); });
  EXPECT_NE(message.find("value -1"), std::string::npos) << message;
  // With another ignore_index, -100 is an ordinary (bad) class again.
  const std::string other = assert_message([&] { F::cross_entropy(logits(), labels({2, -100, 0}), {}, 0.0, 0); });
  EXPECT_NE(other.find("value -100"), std::string::npos) << other;
}

TEST_P(FunctionalApi, NllLossIgnoresTargetsToo) {
  const Tensor lp = tensor<float>({-0.5, -1, -2, -3, -0.1, -4}, {2, 3}, device());
  EXPECT_NEAR(F::nll_loss(lp, labels({-100, 2})).item<double>(), 4.0, 1e-6);
  expect_gradcheck([&](const Inputs& x) { return F::nll_loss(x[0], labels({1, -100, 2})); }, {leaf({3, 4})});
}

TEST_P(FunctionalApi, BatchNormNeedsOnlyTheInputWhenTraining) {
  const Tensor x = tensor<float>({1, 2, 3, 5}, {4, 1}, device());
  const Tensor y = F::batch_norm(x, {}, {}, {}, {}, /*training=*/true);
  const double mean = 2.75, var = ((1 - mean) * (1 - mean) + (2 - mean) * (2 - mean) + (3 - mean) * (3 - mean) +
                                   (5 - mean) * (5 - mean)) /
                                  4;
  std::vector<double> expected;
  for (const double v : {1.0, 2.0, 3.0, 5.0}) expected.push_back((v - mean) / std::sqrt(var + 1e-5));
  expect_near(y.to_vector<float>(), expected);
  expect_near(F::batch_norm(x, {}, {}, F::BatchNormFuncOptions().training(true)).to_vector<float>(), expected);
}

TEST_P(FunctionalApi, BatchNormDefaultsToInferenceAsPyTorch) {
  const Tensor x = tensor<float>({1, 2, 3, 5}, {2, 2}, device());
  const Tensor mean = tensor<float>({1, 2}, {}, device()), var = tensor<float>({4, 1}, {}, device());
  expect_near(F::batch_norm(x, mean, var).to_vector<float>(),
              {0.0, 0.0, 2.0 / std::sqrt(4 + 1e-5), 3.0 / std::sqrt(1 + 1e-5)});
  // Inference without running statistics says what is missing.
  EXPECT_THROW(F::batch_norm(x), InvalidArgumentError);
}

TEST_P(FunctionalApi, BatchNormOptionsMatchThePositionalForm) {
  const Tensor x = randn({4, 3, 2, 2}, f32());
  const Tensor w = tensor<float>({1, 2, 3}, {}, device()), b = tensor<float>({0, -1, 1}, {}, device());
  Tensor rm1 = zeros({3}, f32()), rv1 = ones({3}, f32()), rm2 = zeros({3}, f32()), rv2 = ones({3}, f32());
  const Tensor positional = F::batch_norm(x, rm1, rv1, w, b, true, 0.3, 1e-3);
  const Tensor options =
      F::batch_norm(x, rm2, rv2, F::BatchNormFuncOptions().weight(w).bias(b).training(true).momentum(0.3).eps(1e-3));
  EXPECT_EQ(positional.to_vector<float>(), options.to_vector<float>());
  EXPECT_EQ(rm1.to_vector<float>(), rm2.to_vector<float>());
  EXPECT_EQ(rv1.to_vector<float>(), rv2.to_vector<float>());
}

TEST_P(FunctionalApi, Conv2dOptionsMatchThePositionalForm) {
  const Tensor x = randn({2, 4, 7, 7}, f32()), w = randn({6, 2, 3, 3}, f32()), b = randn({6}, f32());
  const Tensor positional = F::conv2d(x, w, b, 2, {1, 0}, 1, 2);
  const Tensor options = F::conv2d(x, w, F::Conv2dFuncOptions().bias(b).stride(2).padding({1, 0}).groups(2));
  EXPECT_EQ(options.shape(), positional.shape());
  EXPECT_EQ(options.to_vector<float>(), positional.to_vector<float>());
  const Tensor dense = randn({6, 4, 3, 3}, f32());
  EXPECT_EQ(F::conv2d(x, dense, F::Conv2dFuncOptions().dilation(2)).to_vector<float>(),
            F::conv2d(x, dense, {}, 1, 0, 2).to_vector<float>());
}

TEST_P(FunctionalApi, MaxPool2dOptionsMatchThePositionalForm) {
  const Tensor x = randn({1, 2, 6, 6}, f32());
  EXPECT_EQ(F::max_pool2d(x, F::MaxPool2dFuncOptions(2)).to_vector<float>(), F::max_pool2d(x, 2).to_vector<float>());
  EXPECT_EQ(F::max_pool2d(x, F::MaxPool2dFuncOptions({3, 2}).stride(1).padding(1)).to_vector<float>(),
            F::max_pool2d(x, {3, 2}, F::Pair(1), 1).to_vector<float>());
}

TEST_P(FunctionalApi, CrossEntropyOptionsMatchThePositionalForm) {
  const Tensor t = labels({2, 0, 1});
  EXPECT_EQ(F::cross_entropy(logits(), t, F::CrossEntropyFuncOptions()).item<float>(),
            F::cross_entropy(logits(), t).item<float>());
  const auto options = F::CrossEntropyFuncOptions().reduction(Reduction::Sum).label_smoothing(0.1).ignore_index(0);
  EXPECT_EQ(F::cross_entropy(logits(), t, options).item<float>(),
            F::cross_entropy(logits(), t, Reduction::Sum, 0.1, 0).item<float>());
}

INSTANTIATE_TEST_SUITE_P(Devices, FunctionalApi, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
