// cross_entropy, nll_loss and mse_loss: values against std::log computations, each reduction, label smoothing,
// gradients, out-of-range targets (device-side asserts) and argument errors.
#include <gtest/gtest.h>

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
using F::Reduction;
using Inputs = std::vector<Tensor>;
using testing::expect_gradcheck;
using testing::expect_near;

class Losses : public testing::SeededDeviceTest {
 protected:
  Tensor labels(const std::vector<int64_t>& values, const Shape& shape = {}) const {
    return tensor<int64_t>(values, shape, device());
  }
};

/// Per-row cross-entropy computed with std::log: (1 - ls) * -log p_t + ls * mean_c(-log p_c).
std::vector<double> reference(const std::vector<std::vector<double>>& rows, const std::vector<int64_t>& target,
                              double ls = 0.0) {
  std::vector<double> out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double z = 0;
    for (double v : rows[i]) z += std::exp(v);
    double smooth = 0;
    for (double v : rows[i]) smooth -= (v - std::log(z)) / static_cast<double>(rows[i].size());
    const double nll = -(rows[i][static_cast<std::size_t>(target[i])] - std::log(z));
    out.push_back((1 - ls) * nll + ls * smooth);
  }
  return out;
}

const std::vector<std::vector<double>> kRows{{1, 2, 3}, {1, 0, -1}, {0.5, 0.5, -2}};
const std::vector<int64_t> kTarget{2, 0, 1};

Tensor rows_tensor(Device device) { return tensor<float>({1, 2, 3, 1, 0, -1, 0.5, 0.5, -2}, {3, 3}, device); }

TEST_P(Losses, CrossEntropyWithEachReduction) {
  const std::vector<double> ref = reference(kRows, kTarget);
  const Tensor logits = rows_tensor(device()), target = labels(kTarget);
  const Tensor none = F::cross_entropy(logits, target, Reduction::None);
  EXPECT_EQ(none.shape(), (Shape{3}));
  EXPECT_EQ(none.dtype(), DType::F32);
  expect_near(none.to_vector<float>(), ref);
  const Tensor total = F::cross_entropy(logits, target, Reduction::Sum);
  EXPECT_EQ(total.dim(), 0);
  EXPECT_NEAR(total.item<double>(), ref[0] + ref[1] + ref[2], 1e-5);
  EXPECT_NEAR(F::cross_entropy(logits, target).item<double>(), (ref[0] + ref[1] + ref[2]) / 3, 1e-5);
}

TEST_P(Losses, CrossEntropyWithLabelSmoothing) {
  const std::vector<double> ref = reference(kRows, kTarget, 0.2);
  const Tensor logits = rows_tensor(device()), target = labels(kTarget);
  expect_near(F::cross_entropy(logits, target, Reduction::None, 0.2).to_vector<float>(), ref);
  EXPECT_NEAR(F::cross_entropy(logits, target, Reduction::Mean, 0.2).item<double>(), (ref[0] + ref[1] + ref[2]) / 3,
              1e-5);
}

TEST_P(Losses, CrossEntropyOverExtraDims) {
  // [N=2, C=3, d=2]: the class scores of element (n, j) are logits[n, :, j].
  const Tensor logits = tensor<float>({1, 0.5, 2, 0, 3, -2, 1, 1, 0, 2, -1, 0}, {2, 3, 2}, device());
  const Tensor target = labels({2, 0, 1, 2}, {2, 2});
  const std::vector<double> ref = reference({{1, 2, 3}, {0.5, 0, -2}, {1, 0, -1}, {1, 2, 0}}, {2, 0, 1, 2}, 0.1);
  const Tensor none = F::cross_entropy(logits, target, Reduction::None, 0.1);
  EXPECT_EQ(none.shape(), (Shape{2, 2}));
  expect_near(none.to_vector<float>(), ref);
  EXPECT_NEAR(F::cross_entropy(logits, target, Reduction::Sum, 0.1).item<double>(), ref[0] + ref[1] + ref[2] + ref[3],
              1e-5);
}

TEST_P(Losses, CrossEntropyAcceptsI32Targets) {
  const Tensor target = tensor<int32_t>({2, 0, 1}, {}, device());
  EXPECT_NEAR(F::cross_entropy(rows_tensor(device()), target, Reduction::Sum).item<double>(),
              F::cross_entropy(rows_tensor(device()), labels(kTarget), Reduction::Sum).item<double>(), 1e-6);
}

TEST_P(Losses, CrossEntropyGradientIsSoftmaxMinusOneHot) {
  Tensor logits = rows_tensor(device());
  logits.requires_grad_();
  F::cross_entropy(logits, labels(kTarget), Reduction::Sum).backward();
  std::vector<double> expected;
  for (std::size_t i = 0; i < kRows.size(); ++i) {
    double z = 0;
    for (double v : kRows[i]) z += std::exp(v);
    for (std::size_t c = 0; c < 3; ++c) {
      expected.push_back(std::exp(kRows[i][c]) / z - (static_cast<int64_t>(c) == kTarget[i] ? 1.0 : 0.0));
    }
  }
  EXPECT_EQ(logits.grad().dtype(), DType::F32);
  expect_near(logits.grad().to_vector<float>(), expected);
}

TEST_P(Losses, CrossEntropyGradients) {
  const Tensor t2 = labels({1, 0, 3, 3}), t3 = labels({0, 2, 1, 1, 2, 0}, {2, 3});
  for (const Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    for (const double ls : {0.0, 0.3}) {
      SCOPED_TRACE(::testing::Message() << "reduction " << static_cast<int>(r) << ", label_smoothing " << ls);
      expect_gradcheck([&](const Inputs& x) { return F::cross_entropy(x[0], t2, r, ls); }, {leaf({4, 4})});
      expect_gradcheck([&](const Inputs& x) { return F::cross_entropy(x[0], t3, r, ls); }, {leaf({2, 3, 3})});
    }
  }
  // A non-contiguous input.
  expect_gradcheck([&](const Inputs& x) { return F::cross_entropy(x[0].t(), t2); }, {leaf({4, 4})});
}

TEST_P(Losses, CrossEntropyOutOfRangeTargetIsADeviceAssert) {
  const std::string message = assert_message([&] { F::cross_entropy(rows_tensor(device()), labels({2, 3, 0})); });
  ASSERT_FALSE(message.empty()) << "no DeviceAssertError";
  EXPECT_NE(message.find("cross_entropy"), std::string::npos) << message;
  EXPECT_NE(message.find("value 3"), std::string::npos) << message;
  EXPECT_NE(message.find("element 1"), std::string::npos) << message;
  EXPECT_NE(message.find("[0, 3)"), std::string::npos) << message;
  const std::string negative = assert_message([&] { F::cross_entropy(rows_tensor(device()), labels({2, 0, -1})); });
  EXPECT_NE(negative.find("value -1"), std::string::npos) << negative;
  EXPECT_NE(negative.find("element 2"), std::string::npos) << negative;
  // Reported once: later work runs normally.
  synchronize(device());
  EXPECT_NO_THROW(F::cross_entropy(rows_tensor(device()), labels(kTarget)).item<double>());
}

TEST_P(Losses, CrossEntropyRejectsBadArguments) {
  const Tensor logits = rows_tensor(device());
  EXPECT_THROW(F::cross_entropy(logits, zeros({3}, f32())), DTypeError);
  EXPECT_THROW(F::cross_entropy(logits, tensor<bool>({true, false, true}, {}, device())), DTypeError);
  EXPECT_THROW(F::cross_entropy(labels({1, 2, 3}, {1, 3}), labels({0})), DTypeError);
  EXPECT_THROW(F::cross_entropy(logits, labels({0, 1})), ShapeError);
  EXPECT_THROW(F::cross_entropy(logits, labels({0, 1, 0}, {3, 1})), ShapeError);
  EXPECT_THROW(F::cross_entropy(zeros({3}, f32()), labels({0})), ShapeError);
  EXPECT_THROW(F::cross_entropy(zeros({2, 3, 4}, f32()), labels({0, 1, 0, 1, 0, 1}, {2, 3})), ShapeError);
  EXPECT_THROW(F::cross_entropy(logits, labels(kTarget), Reduction::Mean, 1.0), InvalidArgumentError);
  EXPECT_THROW(F::cross_entropy(logits, labels(kTarget), Reduction::Mean, -0.1), InvalidArgumentError);
  EXPECT_THROW(F::cross_entropy(logits, labels(kTarget), Reduction::Mean, std::nan("")), InvalidArgumentError);
  try {
    F::cross_entropy(logits, labels({0, 1}));
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("cross_entropy: batch sizes differ"), std::string::npos) << message;
  }
}

TEST_P(Losses, NllLossPicksTheTargetLogProbability) {
  const Tensor lp = tensor<float>({-0.5, -1, -2, -3, -0.1, -4}, {2, 3}, device());
  const Tensor target = labels({2, 1});
  expect_near(F::nll_loss(lp, target, Reduction::None).to_vector<float>(), {2, 0.1});
  EXPECT_NEAR(F::nll_loss(lp, target, Reduction::Sum).item<double>(), 2.1, 1e-6);
  EXPECT_NEAR(F::nll_loss(lp, target).item<double>(), 1.05, 1e-6);
  // nll_loss(log_softmax(x)) is cross_entropy(x).
  const Tensor logits = rows_tensor(device());
  EXPECT_NEAR(F::nll_loss(log_softmax(logits, 1), labels(kTarget)).item<double>(),
              F::cross_entropy(logits, labels(kTarget)).item<double>(), 1e-6);
}

TEST_P(Losses, NllLossGradients) {
  const Tensor t = labels({1, 0, 3});
  for (const Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    expect_gradcheck([&](const Inputs& x) { return F::nll_loss(x[0], t, r); }, {leaf({3, 4})});
  }
  expect_gradcheck([&](const Inputs& x) { return F::nll_loss(log_softmax(x[0], 1), t); }, {leaf({3, 4})});
}

TEST_P(Losses, NllLossOutOfRangeTargetIsADeviceAssert) {
  const Tensor lp = zeros({2, 3}, f32());
  const std::string message = assert_message([&] { F::nll_loss(lp, labels({0, 7})); });
  ASSERT_FALSE(message.empty()) << "no DeviceAssertError";
  EXPECT_NE(message.find("nll_loss"), std::string::npos) << message;
  EXPECT_NE(message.find("value 7"), std::string::npos) << message;
  EXPECT_NE(message.find("element 1"), std::string::npos) << message;
}

TEST_P(Losses, NllLossRejectsBadArguments) {
  const Tensor lp = zeros({2, 3}, f32());
  EXPECT_THROW(F::nll_loss(lp, zeros({2}, f32())), DTypeError);
  EXPECT_THROW(F::nll_loss(lp, labels({0, 1, 2})), ShapeError);
  EXPECT_THROW(F::nll_loss(zeros({3}, f32()), labels({0})), ShapeError);
}

TEST_P(Losses, MseLossWithEachReduction) {
  const Tensor a = tensor<float>({1, 2, 3, 4}, {2, 2}, device()), b = tensor<float>({0, 2, 5, 1}, {2, 2}, device());
  const Tensor none = F::mse_loss(a, b, Reduction::None);
  EXPECT_EQ(none.shape(), (Shape{2, 2}));
  expect_near(none.to_vector<float>(), {1, 0, 4, 9});
  EXPECT_NEAR(F::mse_loss(a, b, Reduction::Sum).item<double>(), 14, 1e-6);
  EXPECT_NEAR(F::mse_loss(a, b).item<double>(), 3.5, 1e-6);
}

TEST_P(Losses, MseLossGradients) {
  for (const Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    expect_gradcheck([&](const Inputs& x) { return F::mse_loss(x[0], x[1], r); }, {leaf({2, 3}), leaf({2, 3})});
  }
}

TEST_P(Losses, MseLossRejectsBadArguments) {
  EXPECT_THROW(F::mse_loss(zeros({2, 3}, f32()), zeros({3}, f32())), ShapeError);
  EXPECT_THROW(F::mse_loss(zeros({2}, f32()), labels({1, 2})), DTypeError);
}

INSTANTIATE_TEST_SUITE_P(Devices, Losses, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
