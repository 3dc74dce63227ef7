// The layers over the DNN primitives (nn/layers_dnn.cpp): convolution, pooling, normalisation, dropout, embedding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/nn/layers.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

std::vector<float> values(const Tensor& t) { return t.cpu().to(DType::F32).contiguous().to_vector<float>(); }

void expect_near(const std::vector<float>& got, const std::vector<float>& expected, float tol = 1e-4f) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) out.push_back(item.first);
  return out;
}

class LayersDnnOnDevice : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  // 1x1x4x4 with values 0..15.
  Tensor grid() const { return arange(0, 16, 1, TensorOptions(DType::F32).device(device())).reshape({1, 1, 4, 4}); }
};

TEST_P(LayersDnnOnDevice, Conv2dShapesAndDefaultInit) {
  manual_seed(0);
  nn::Conv2d conv(nn::Conv2dOptions(4, 8, 3).stride(2).padding(1).device(device()));
  EXPECT_EQ(conv.weight.shape(), (Shape{8, 4, 3, 3}));
  EXPECT_EQ(names_of(conv.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  const float bound = 1.0f / std::sqrt(36.0f);
  for (const Tensor& t : {conv.weight, conv.bias}) {
    for (float v : values(t)) {
      EXPECT_GE(v, -bound);
      EXPECT_LE(v, bound);
    }
  }
  EXPECT_EQ(conv(randn({2, 4, 9, 9}).to(device())).shape(), (Shape{2, 8, 5, 5}));
}

TEST_P(LayersDnnOnDevice, Conv2dWithKnownWeights) {
  nn::Conv2d conv(nn::Conv2dOptions(1, 1, 2).device(device()));
  {
    NoGradGuard no_grad;  // parameters are written as an optimizer writes them
    conv.weight.copy_(ones({1, 1, 2, 2}, device()));
    conv.bias.fill_(1.0);
  }
  // Each output is the sum of a 2x2 window plus 1: windows at (0,0) 0+1+4+5, ...
  expect_near(values(conv(grid())), {11, 15, 19, 27, 31, 35, 43, 47, 51});
}

TEST_P(LayersDnnOnDevice, Pools) {
  expect_near(values(nn::MaxPool2d(2)(grid())), {5, 7, 13, 15});
  expect_near(values(nn::AvgPool2d(2)(grid())), {2.5f, 4.5f, 10.5f, 12.5f});
  expect_near(values(nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(1))(grid())), {10, 11, 14, 15});
  expect_near(values(nn::AdaptiveAvgPool2d(1)(grid())), {7.5f});
}

TEST_P(LayersDnnOnDevice, BatchNorm2dTrainsAndTracksRunningStatistics) {
  nn::BatchNorm2d bn(nn::BatchNorm2dOptions(2).device(device()));
  EXPECT_EQ(names_of(bn.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(names_of(bn.named_buffers()),
            (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  // Channel 0 holds 1, 3; channel 1 holds 10, 10.
  const Tensor x = tensor<float>({1, 10, 3, 10}, {2, 2, 1, 1}, device());
  const Tensor y = bn(x);
  expect_near(values(y), {-1, 0, 1, 0}, 1e-3f);
  // running = 0.9 * running + 0.1 * batch stat (unbiased variance: 2 for channel 0, 0 for channel 1).
  expect_near(values(bn.running_mean), {0.2f, 1.0f});
  expect_near(values(bn.running_var), {0.9f + 0.2f, 0.9f});
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  bn.eval();
  const Tensor z = bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  expect_near(values(z), {(1 - 0.2f) / std::sqrt(1.1f + 1e-5f), (10 - 1.0f) / std::sqrt(0.9f + 1e-5f),
                          (3 - 0.2f) / std::sqrt(1.1f + 1e-5f), (10 - 1.0f) / std::sqrt(0.9f + 1e-5f)});
}

TEST_P(LayersDnnOnDevice, BatchNorm2dToF64KeepsTheCounterAnInteger) {
  nn::BatchNorm2d bn(nn::BatchNorm2dOptions(3).device(device()));
  bn.to(DType::F64);
  EXPECT_EQ(bn.running_mean.dtype(), DType::F64);
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::I64);
}

TEST_P(LayersDnnOnDevice, LayerNormNormalisesTheLastDims) {
  nn::LayerNorm ln(nn::LayerNormOptions(Shape{4}).device(device()));
  EXPECT_EQ(values(ln.weight), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(values(ln.bias), (std::vector<float>{0, 0, 0, 0}));
  const Tensor y = ln(tensor<float>({1, 2, 3, 4}, {1, 4}, device()));
  const float s = std::sqrt(1.25f + 1e-5f);
  expect_near(values(y), {-1.5f / s, -0.5f / s, 0.5f / s, 1.5f / s});
}

TEST_P(LayersDnnOnDevice, DropoutIsIdentityInEvalAndDropsInTraining) {
  nn::Dropout dropout(0.5);
  const Tensor x = ones({1000}, TensorOptions().device(device()));
  const auto trained = values(dropout(x));
  int zeros_seen = 0;
  for (float v : trained) {
    EXPECT_TRUE(v == 0.0f || std::abs(v - 2.0f) < 1e-6f) << v;
    zeros_seen += v == 0.0f;
  }
  EXPECT_GT(zeros_seen, 400);
  EXPECT_LT(zeros_seen, 600);
  dropout.eval();
  EXPECT_EQ(values(dropout(x)), values(x));
}

TEST_P(LayersDnnOnDevice, EmbeddingLooksUpRows) {
  manual_seed(0);
  nn::Embedding emb(10, 3, TensorOptions().device(device()));
  EXPECT_EQ(emb.weight.shape(), (Shape{10, 3}));
  const Tensor idx = tensor<int64_t>({2, 7, 2}, {}, device());
  const Tensor out = emb(idx);
  EXPECT_EQ(out.shape(), (Shape{3, 3}));
  expect_near(values(out.select(0, 0)), values(emb.weight.select(0, 2)));
  expect_near(values(out.select(0, 1)), values(emb.weight.select(0, 7)));
}

TEST_P(LayersDnnOnDevice, SmallConvNetRuns) {
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1).device(device())),
                     nn::BatchNorm2d(nn::BatchNorm2dOptions(4).device(device())), nn::ReLU(), nn::MaxPool2d(2),
                     nn::Flatten(), nn::Dropout(0.1), nn::Linear(nn::LinearOptions(16, 3).device(device())));
  const Tensor y = net(grid());
  EXPECT_EQ(y.shape(), (Shape{1, 3}));
  EXPECT_EQ(names_of(net.named_buffers()),
            (std::vector<std::string>{"1.running_mean", "1.running_var", "1.num_batches_tracked"}));
}

TEST_P(LayersDnnOnDevice, SequentialFusesAConv2dFollowedByAReLU) {
  manual_seed(3);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(2, 3, 3).padding(1).device(device())), nn::ReLU());
  Tensor x = randn({2, 2, 5, 5}).to(device());
  x.requires_grad_();
  // As written unless asked: conv2d then relu.
  EXPECT_FALSE(net.fused());
  EXPECT_EQ(net(x).grad_fn_name(), "relu");
  // Fused: one conv2d_relu node instead of conv2d then relu.
  net.fuse();
  EXPECT_TRUE(net.fused());
  const Tensor fused = net(x);
  EXPECT_EQ(fused.grad_fn_name(), "conv2d_relu");
  sum(fused * fused).backward();
  const std::vector<float> fused_dx = values(x.grad()), fused_dw = values(net.at<nn::Conv2d>(0)->weight.grad());
  // Layer by layer: the same values and gradients.
  x.set_grad(Tensor());
  net.zero_grad();
  const Tensor separate = (*net[1])((*net[0])(x));
  EXPECT_EQ(separate.grad_fn_name(), "relu");
  expect_near(values(fused), values(separate));
  sum(separate * separate).backward();
  expect_near(fused_dx, values(x.grad()));
  expect_near(fused_dw, values(net.at<nn::Conv2d>(0)->weight.grad()));
  // The fused call checks the input's device as a layer call does.
  if (device() != kCPU) {
    EXPECT_THROW(net(randn({2, 2, 5, 5})), DeviceMismatchError);
  }
}

TEST_P(LayersDnnOnDevice, SequentialPoolsBeforeTheReLUOfAConv2dReLUMaxPool2d) {
  manual_seed(4);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(2, 3, 3).padding(1).device(device())), nn::ReLU(), nn::MaxPool2d(2));
  Tensor x = randn({2, 2, 6, 6}).to(device());
  x.requires_grad_();
  EXPECT_EQ(net(x).grad_fn_name(), "max_pool2d") << "not fused: the layers as written";
  net.fuse();
  // Rearranged: convolution, pooling, then the ReLU (Note [Fusing a Sequential's layers]).
  const Tensor pooled_first = net(x);
  EXPECT_EQ(pooled_first.grad_fn_name(), "relu");
  const std::vector<float> out = values(pooled_first);
  EXPECT_GT(std::count(out.begin(), out.end(), 0.0f), 0) << "some windows should hold no positive value";
  sum(pooled_first * pooled_first).backward();
  const std::vector<float> dx = values(x.grad()), dw = values(net.at<nn::Conv2d>(0)->weight.grad()),
                           db = values(net.at<nn::Conv2d>(0)->bias.grad());
  // Layer by layer: the same values and gradients.
  x.set_grad(Tensor());
  net.zero_grad();
  const Tensor separate = (*net[2])((*net[1])((*net[0])(x)));
  EXPECT_EQ(separate.grad_fn_name(), "max_pool2d");
  expect_near(out, values(separate));
  sum(separate * separate).backward();
  expect_near(dx, values(x.grad()));
  expect_near(dw, values(net.at<nn::Conv2d>(0)->weight.grad()));
  expect_near(db, values(net.at<nn::Conv2d>(0)->bias.grad()));
}

INSTANTIATE_TEST_SUITE_P(Devices, LayersDnnOnDevice, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

TEST(LayersDnn, Conv2dRejectsGroupsThatDoNotDivide) {
  EXPECT_THROW(nn::Conv2d(nn::Conv2dOptions(3, 4, 3).groups(2)), InvalidArgumentError);
}

TEST(LayersDnn, DropoutRejectsABadProbability) { EXPECT_THROW(nn::Dropout(1.5), InvalidArgumentError); }

}  // namespace
}  // namespace strata
