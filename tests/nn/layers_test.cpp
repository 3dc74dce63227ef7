// Linear, the activations, Flatten and Sequential on every available device.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/nn/layers.h"
#include "strata/optim/sgd.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

using nn::Linear;
using nn::Sequential;

std::vector<float> values(const Tensor& t) { return t.cpu().to(DType::F32).contiguous().to_vector<float>(); }

void expect_near(const std::vector<float>& got, const std::vector<float>& expected, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
}

class LayersOnDevice : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  // Linear(3, 2) with weight [[1, 2, 3], [-1, 0, 1]] and bias [0.5, -0.5].
  Linear known_linear() {
    Linear fc(nn::LinearOptions(3, 2).device(device()));
    NoGradGuard no_grad;  // parameters are written as an optimizer writes them
    fc.weight.copy_(tensor<float>({1, 2, 3, -1, 0, 1}, {2, 3}, device()));
    fc.bias.copy_(tensor<float>({0.5f, -0.5f}, {}, device()));
    return fc;
  }
};

TEST_P(LayersOnDevice, LinearMatchesAHandComputation) {
  Linear fc = known_linear();
  EXPECT_EQ(fc.weight.device(), device());
  const Tensor x = tensor<float>({1, 0, 2, -1, 1, 1}, {2, 3}, device());
  // Row 0: [1+0+6+0.5, -1+0+2-0.5]; row 1: [-1+2+3+0.5, 1+0+1-0.5].
  expect_near(values(fc(x)), {7.5f, 0.5f, 4.5f, 1.5f});
}

TEST_P(LayersOnDevice, LinearOnBatchedAndVectorInputs) {
  Linear fc = known_linear();
  const Tensor x = tensor<float>({1, 0, 2, -1, 1, 1}, {2, 1, 3}, device());
  const Tensor y = fc(x);
  EXPECT_EQ(y.shape(), (Shape{2, 1, 2}));
  expect_near(values(y), {7.5f, 0.5f, 4.5f, 1.5f});
  expect_near(values(fc(tensor<float>({1, 0, 2}, {}, device()))), {7.5f, 0.5f});
}

TEST_P(LayersOnDevice, LinearWithoutBias) {
  Linear fc(nn::LinearOptions(3, 2).bias(false).device(device()));
  EXPECT_FALSE(fc.bias.defined());
  EXPECT_EQ(fc.parameters().size(), 1u);
  {
    NoGradGuard no_grad;
    fc.weight.copy_(tensor<float>({1, 2, 3, -1, 0, 1}, {2, 3}, device()));
  }
  expect_near(values(fc(tensor<float>({1, 0, 2}, {1, 3}, device()))), {7.0f, 1.0f});
}

TEST_P(LayersOnDevice, LinearGradientsReachWeightAndBias) {
  Linear fc = known_linear();
  const Tensor x = tensor<float>({1, 0, 2, -1, 1, 1}, {2, 3}, device());
  sum(fc(x)).backward();
  // d/dW of sum(xW^T + b) is the column sums of x for each output row; d/db is the batch size.
  expect_near(values(fc.weight.grad()), {0, 1, 3, 0, 1, 3});
  expect_near(values(fc.bias.grad()), {2, 2});
}

TEST_P(LayersOnDevice, LinearDefaultInitIsBoundedByOneOverSqrtFanIn) {
  manual_seed(0);
  Linear fc(nn::LinearOptions(16, 64).device(device()));
  const float bound = 1.0f / 4.0f;
  for (const Tensor& t : {fc.weight, fc.bias}) {
    const auto v = values(t);
    float lo = 1, hi = -1;
    for (float x : v) lo = std::min(lo, x), hi = std::max(hi, x);
    EXPECT_GE(lo, -bound);
    EXPECT_LE(hi, bound);
    EXPECT_GT(hi - lo, bound);  // spread over the range, not constant
  }
}

TEST_P(LayersOnDevice, ActivationsAndFlatten) {
  const Tensor x = tensor<float>({-1, 0, 2, 3}, {1, 2, 2}, device());
  expect_near(values(nn::ReLU()(x)), {0, 0, 2, 3});
  expect_near(values(nn::Tanh()(x)), {std::tanh(-1.0f), 0, std::tanh(2.0f), std::tanh(3.0f)});
  expect_near(values(nn::Sigmoid()(x)), {1 / (1 + std::exp(1.0f)), 0.5f, 1 / (1 + std::exp(-2.0f)),
                                         1 / (1 + std::exp(-3.0f))});
  expect_near(values(nn::GELU()(x)), {-0.158655f, 0, 1.954500f, 2.995950f});
  EXPECT_EQ(nn::Flatten()(x).shape(), (Shape{1, 4}));
}

TEST_P(LayersOnDevice, SequentialComposesItsLayers) {
  manual_seed(4);
  Sequential model(Linear(nn::LinearOptions(3, 5).device(device())), nn::ReLU(),
                   std::make_shared<Linear>(nn::LinearOptions(5, 2).device(device())));
  ASSERT_EQ(model.size(), 3u);
  const Tensor x = randn({4, 3}).to(device());
  const Tensor by_hand = (*model[2])(relu((*model[0])(x)));
  expect_near(values(model(x)), values(by_hand));
  EXPECT_EQ(model.at<Linear>(2)->options.in_features, 5);
  EXPECT_EQ(model.at<Linear>(1), nullptr);
}

TEST_P(LayersOnDevice, LazyLinearInfersInFeaturesAtTheFirstForward) {
  Linear fc(nn::LinearOptions(-1, 2));
  EXPECT_FALSE(fc.is_initialized());
  optim::SGD sgd(fc.parameters(), 0.1);  // built before the shapes are known
  fc.to(device());
  const Tensor x = ones({4, 5}, TensorOptions().device(device()));
  EXPECT_EQ(fc(x).shape(), (Shape{4, 2}));
  EXPECT_TRUE(fc.is_initialized());
  EXPECT_EQ(fc.options.in_features, 5);
  EXPECT_EQ(sgd.params()[0].shape(), (Shape{2, 5}));
  EXPECT_EQ(sgd.params()[0].device(), device());
  const std::vector<float> before = values(fc.weight);
  sgd.zero_grad();
  sum(fc(x)).backward();
  sgd.step();
  EXPECT_NE(values(fc.weight), before);
  for (float v : before) EXPECT_LE(std::abs(v), 1.0f / std::sqrt(5.0f));
}

INSTANTIATE_TEST_SUITE_P(Devices, LayersOnDevice, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

TEST(Layers, SequentialPushBackNamesChildrenByIndex) {
  Sequential model;
  model.push_back(nn::Dense(2, 3));
  model.push_back(std::make_shared<nn::Tanh>());
  model.push_back(Linear(3, 1));
  std::vector<std::string> names;
  for (const auto& [name, child] : model.named_children()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_THROW(model[3], IndexError);
}

TEST(Layers, LinearRejectsAWrongInputWidth) {
  Linear fc(3, 2);
  try {
    fc(zeros({4, 5}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("in_features = 3"), std::string::npos) << e.what();
  }
}

TEST(Layers, FunctionalLinearChecksItsArguments) {
  EXPECT_THROW(nn::functional::linear(zeros({2, 3}), zeros({3})), ShapeError);
  EXPECT_THROW(nn::functional::linear(zeros({2, 3}), zeros({2, 3}), zeros({3})), ShapeError);
}

TEST(Layers, LayersAcceptADtype) {
  Linear fc(nn::LinearOptions(3, 2).dtype(DType::F64));
  EXPECT_EQ(fc.weight.dtype(), DType::F64);
  EXPECT_EQ(fc(ones({1, 3}, DType::F64)).dtype(), DType::F64);
}

}  // namespace
}  // namespace strata
