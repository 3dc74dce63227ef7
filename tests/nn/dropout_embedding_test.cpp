// dropout (rate, scale, seeding, identity cases, gradient) and embedding (rows, shapes, accumulated gradients,
// out-of-range indices as device-side asserts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/runtime/stream.h"
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

class DropoutEmbedding : public testing::SeededDeviceTest {};

// --- dropout ---

TEST_P(DropoutEmbedding, DropoutZeroesAFractionPAndScalesTheRest) {
  constexpr int64_t n = 100000;
  const double p = 0.3;
  const std::vector<float> y = F::dropout(ones({n}, f32()), p).to_vector<float>();
  const auto zeros_seen = std::count(y.begin(), y.end(), 0.0f);
  EXPECT_NEAR(static_cast<double>(zeros_seen) / n, p, 0.01);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  for (float v : y) {
    if (v != 0.0f) {
      ASSERT_FLOAT_EQ(v, scale);
    }
  }
}

TEST_P(DropoutEmbedding, DropoutWithTheSameSeedDrawsTheSameMask) {
  const Tensor x = randn({1000}, f32());
  default_generator(device()).manual_seed(7);
  const std::vector<float> a = F::dropout(x, 0.5).to_vector<float>();
  const std::vector<float> b = F::dropout(x, 0.5).to_vector<float>();
  default_generator(device()).manual_seed(7);
  const std::vector<float> c = F::dropout(x, 0.5).to_vector<float>();
  EXPECT_EQ(a, c);
  EXPECT_NE(a, b) << "successive draws use fresh random numbers";
}

TEST_P(DropoutEmbedding, DropoutIsTheIdentityInEvalModeAndForPZero) {
  const Tensor x = randn({4, 5}, f32());
  EXPECT_TRUE(F::dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_TRUE(F::dropout(x, 0.0).is_same(x));
}

TEST_P(DropoutEmbedding, DropoutBackwardUsesTheSameMask) {
  Tensor x = ones({2000}, f32());
  x.requires_grad_();
  const Tensor y = F::dropout(x, 0.4);
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), y.to_vector<float>()) << "d y / d x is the mask, and y = 1 * mask";
  const Device dev = device();
  expect_gradcheck(
      [dev](const Inputs& in) {
        default_generator(dev).manual_seed(3);  // the same mask on every evaluation
        return F::dropout(in[0], 0.4);
      },
      {leaf({3, 4})});
}

TEST_P(DropoutEmbedding, DropoutRejectsBadArguments) {
  const Tensor x = ones({4}, f32());
  EXPECT_THROW(F::dropout(x, -0.1), InvalidArgumentError);
  EXPECT_THROW(F::dropout(x, std::nan("")), InvalidArgumentError);
  EXPECT_THROW(F::dropout(tensor<int64_t>({1, 2}, {}, device()), 0.5), DTypeError);
  try {
    F::dropout(x, 1.5);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("dropout: p must be in [0, 1], got 1.5"), std::string::npos) << e.what();
  }
}

TEST_P(DropoutEmbedding, DropoutOfOneDropsEverything) {
  // As in PyTorch; nn::Dropout(1.0) constructs, so its forward must run too.
  Tensor x = ones({4}, f32());
  x.requires_grad_();
  const Tensor y = F::dropout(x, 1.0);
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(4, 0.0f));
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(4, 0.0f));
}

// --- embedding ---

Tensor table(Device device) { return tensor<float>({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}, device); }

TEST_P(DropoutEmbedding, EmbeddingPicksRows) {
  const Tensor out = F::embedding(tensor<int64_t>({1, 3, 1, 0}, {2, 2}, device()), table(device()));
  EXPECT_EQ(out.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{10, 11, 30, 31, 10, 11, 0, 1}));
  const Tensor one = F::embedding(tensor<int32_t>({2}, {}, device()).reshape({}), table(device()));
  EXPECT_EQ(one.shape(), (Shape{2}));
  EXPECT_EQ(one.to_vector<float>(), (std::vector<float>{20, 21}));
  const Tensor none = F::embedding(empty({0}, TensorOptions(DType::I64).device(device())), table(device()));
  EXPECT_EQ(none.shape(), (Shape{0, 2}));
}

TEST_P(DropoutEmbedding, EmbeddingAccumulatesGradientsOfRepeatedIndices) {
  Tensor weight = table(device());
  weight.requires_grad_();
  const Tensor out = F::embedding(tensor<int64_t>({1, 3, 1, 1}, {2, 2}, device()), weight);
  out.backward(tensor<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}, device()));
  // Row 1 was picked three times (gradients [1,2], [5,6], [7,8]), row 3 once, rows 0 and 2 never.
  EXPECT_EQ(weight.grad().to_vector<float>(), (std::vector<float>{0, 0, 13, 16, 0, 0, 3, 4}));
}

TEST_P(DropoutEmbedding, EmbeddingGradients) {
  const Tensor idx = tensor<int64_t>({0, 2, 2, 4, 1, 0}, {3, 2}, device());
  expect_gradcheck([idx](const Inputs& in) { return F::embedding(idx, in[0]); }, {leaf({5, 3})});
}

TEST_P(DropoutEmbedding, EmbeddingOutOfRangeIndexIsADeviceAssert) {
  const std::string message = assert_message([&] {
    F::embedding(tensor<int64_t>({0, 3, 5, 1}, {}, device()), table(device()));
  });
  ASSERT_FALSE(message.empty()) << "no DeviceAssertError";
  EXPECT_NE(message.find("embedding"), std::string::npos) << message;
  EXPECT_NE(message.find("value 5"), std::string::npos) << message;
  EXPECT_NE(message.find("element 2"), std::string::npos) << message;
  EXPECT_NE(message.find("[0, 4)"), std::string::npos) << message;
  const std::string negative =
      assert_message([&] { F::embedding(tensor<int64_t>({-1}, {}, device()), table(device())); });
  EXPECT_NE(negative.find("value -1"), std::string::npos) << negative;
  synchronize(device());
  EXPECT_EQ(F::embedding(tensor<int64_t>({3}, {}, device()), table(device())).numel(), 2);
}

TEST_P(DropoutEmbedding, EmbeddingRejectsBadArguments) {
  EXPECT_THROW(F::embedding(zeros({2}, f32()), table(device())), DTypeError);
  EXPECT_THROW(F::embedding(tensor<bool>({true}, {}, device()), table(device())), DTypeError);
  EXPECT_THROW(F::embedding(tensor<int64_t>({0}, {}, device()), zeros({4}, f32())), ShapeError);
  EXPECT_THROW(F::embedding(tensor<int64_t>({0}, {}, device()), zeros({4, 2, 2}, f32())), ShapeError);
}

INSTANTIATE_TEST_SUITE_P(Devices, DropoutEmbedding, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
