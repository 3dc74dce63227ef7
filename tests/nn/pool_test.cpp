// max_pool2d, avg_pool2d and adaptive_avg_pool2d on every available device: hand-computed cases, gradients
// against finite differences (f64), and every argument error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_checks.h"
#include "test_devices.h"

namespace strata {
namespace {

namespace F = nn::functional;
using V = std::vector<double>;
using Inputs = std::vector<Tensor>;
using testing::deterministic_tensor;
using testing::expect_error;
using testing::expect_gradcheck;

class Pool : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  TensorOptions opts(DType dtype = DType::F32) const { return TensorOptions(dtype).device(device()); }
  /// 0, 1, 2, ... in `shape`.
  Tensor iota(const Shape& shape, DType dtype = DType::F32) const {
    return arange(numel(shape), TensorOptions(dtype)).reshape(shape).to(device());
  }
  Tensor from(const V& v, const Shape& shape) const { return tensor<double>(v, shape, device()).to(DType::F32); }
};

// --- max_pool2d ---

TEST_P(Pool, MaxPoolTakesEachWindowsMaximum) {
  const Tensor out = F::max_pool2d(iota({1, 1, 4, 4}), 2);
  EXPECT_EQ(out.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(out.to_vector<double>(), (V{5, 7, 13, 15}));
  // Overlapping windows (stride 1) and a rectangular kernel.
  EXPECT_EQ(F::max_pool2d(iota({1, 1, 3, 4}), {2, 3}, 1).to_vector<double>(), (V{6, 7, 10, 11}));
}

TEST_P(Pool, MaxPoolPaddingCountsAsMinusInfinity) {
  // All values negative: zero padding would win; -infinity padding never does.
  const Tensor x = from({-1, -2, -3, -4, -5, -6, -7, -8, -9}, {1, 1, 3, 3});
  const Tensor out = F::max_pool2d(x, 3, 2, 1);
  EXPECT_EQ(out.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(out.to_vector<double>(), (V{-1, -2, -4, -5}));
}

TEST_P(Pool, MaxPoolPropagatesNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> out = F::max_pool2d(from({1, nan, 3, 4}, {1, 1, 2, 2}), 2).to_vector<double>();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(std::isnan(out[0]));
}

TEST_P(Pool, MaxPool2x2PicksTheFirstMaximumAndTheFirstNaN) {
  // 2x2/2 windows (the CPU's fast path): a tie goes to the first in row order; a NaN wins its window only.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const bool with_nan : {false, true}) {
    Tensor x = from({1, 5, 2, 2, with_nan ? nan : 7, 0, 2, 3}, {1, 1, 2, 4});
    x.requires_grad_();
    const Tensor out = F::max_pool2d(x, 2);
    const std::vector<double> values = out.to_vector<double>();
    EXPECT_EQ(std::isnan(values[0]), with_nan);
    if (!with_nan) {
      EXPECT_EQ(values[0], 7);
    }
    EXPECT_EQ(values[1], 3);
    sum(out * from({10, 1}, {1, 1, 1, 2})).backward();
    EXPECT_EQ(x.grad().to_vector<double>(), (V{0, 0, 0, 0, 10, 0, 0, 1}));
  }
  Tensor tied = from({4, 4, 4, 4}, {1, 1, 2, 2});
  tied.requires_grad_();
  sum(F::max_pool2d(tied, 2)).backward();
  EXPECT_EQ(tied.grad().to_vector<double>(), (V{1, 0, 0, 0}));
}

TEST_P(Pool, MaxPool2x2OfF32RowsMatchesTheF64Windows) {
  // Rows of 7 and 16 outputs, odd input sizes (the last row and column belong to no window), ties (values in
  // quarters) and NaNs: the CPU's vectorised f32 2x2/2 path against the f64 path, window by window, values and
  // where the gradients go.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Shape& shape : {Shape{2, 3, 9, 15}, Shape{1, 2, 5, 33}}) {
    std::vector<double> v = deterministic_tensor(shape, DType::F64, kCPU, 5).to_vector<double>();
    for (double& x : v) x = std::round(x * 4) / 4;
    v[v.size() / 2] = nan;
    v[2 * shape[3] + 13] = nan;  // input row 2, column 13: window row 1, output column 6 (a row's overlapped last four)
    Tensor x32 = from(v, shape), x64 = tensor<double>(v, shape, device());
    x32.requires_grad_();
    x64.requires_grad_();
    const Tensor out32 = F::max_pool2d(x32, 2), out64 = F::max_pool2d(x64, 2);
    ASSERT_EQ(out32.shape(), out64.shape());
    const std::vector<double> got = out32.to_vector<double>(), want = out64.to_vector<double>();
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << "output " << i;
      } else {
        EXPECT_EQ(got[i], want[i]) << "output " << i;
      }
    }
    const Tensor weights = deterministic_tensor(out32.shape(), DType::F64, device(), 6);
    sum(out32 * weights.to(DType::F32)).backward();
    sum(out64 * weights).backward();
    const std::vector<double> grad32 = x32.grad().to_vector<double>(), grad64 = x64.grad().to_vector<double>();
    for (std::size_t i = 0; i < grad32.size(); ++i) {
      EXPECT_NEAR(grad32[i], grad64[i], 1e-6) << "input " << i;
    }
  }
}

TEST_P(Pool, MaxPoolGradientGoesToEachWindowsMaximum) {
  Tensor x = from({1, 9, 2, 3, 4, 8, 7, 6, 5}, {1, 1, 3, 3});
  x.requires_grad_();
  // 2x2 windows with stride 1: maxima 9, 9, 7, 8; the 9 is the maximum of two windows and collects both.
  const Tensor out = F::max_pool2d(x, 2, 1);
  EXPECT_EQ(out.to_vector<double>(), (V{9, 9, 7, 8}));
  sum(out * from({1, 2, 3, 4}, {1, 1, 2, 2})).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (V{0, 3, 0, 0, 0, 4, 3, 0, 0}));
}

TEST_P(Pool, MaxPoolPassesGradcheck) {
  Tensor x = deterministic_tensor({2, 3, 7, 6}, DType::F64, device(), 1);
  x.requires_grad_();
  expect_gradcheck([](const Inputs& in) { return F::max_pool2d(in[0], 2); }, {x}, "kernel 2");
  expect_gradcheck([](const Inputs& in) { return F::max_pool2d(in[0], 3, 2, 1); }, {x}, "kernel 3 stride 2 padding 1");
  expect_gradcheck(
      [](const Inputs& in) {
        return F::max_pool2d(in[0], {3, 2}, F::Pair(1, 2), {1, 0});
      },
      {x}, "rectangular");
}

// --- avg_pool2d ---

TEST_P(Pool, AvgPoolAveragesEachWindow) {
  EXPECT_EQ(F::avg_pool2d(iota({1, 1, 4, 4}), 2).to_vector<double>(), (V{2.5, 4.5, 10.5, 12.5}));
  // Two channels and two samples are pooled independently.
  const Tensor out = F::avg_pool2d(iota({2, 2, 2, 2}), 2);
  EXPECT_EQ(out.shape(), (Shape{2, 2, 1, 1}));
  EXPECT_EQ(out.to_vector<double>(), (V{1.5, 5.5, 9.5, 13.5}));
}

TEST_P(Pool, AvgPoolCountsPaddingInTheDivisor) {
  // Ones, 2x2 windows, stride 1, padding 1: each output is (ones in the window) / 4.
  const Tensor out = F::avg_pool2d(ones({1, 1, 2, 2}, opts()), 2, 1, 1);
  EXPECT_EQ(out.shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(out.to_vector<double>(), (V{0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25}));
}

TEST_P(Pool, AvgPoolGradientSpreadsOverEachWindow) {
  Tensor x = ones({1, 1, 3, 3}, opts());
  x.requires_grad_();
  sum(F::avg_pool2d(x, 2, 1)).backward();  // four windows; the centre lies in all of them
  EXPECT_EQ(x.grad().to_vector<double>(), (V{0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25}));
}

TEST_P(Pool, AvgPoolPassesGradcheck) {
  Tensor x = deterministic_tensor({2, 3, 7, 6}, DType::F64, device(), 2);
  x.requires_grad_();
  expect_gradcheck([](const Inputs& in) { return F::avg_pool2d(in[0], 2); }, {x}, "kernel 2");
  expect_gradcheck([](const Inputs& in) { return F::avg_pool2d(in[0], 3, 2, 1); }, {x}, "kernel 3 stride 2 padding 1");
  expect_gradcheck(
      [](const Inputs& in) {
        return F::avg_pool2d(in[0], {2, 3}, F::Pair(1, 2), {1, 1});
      },
      {x}, "rectangular");
}

// --- adaptive_avg_pool2d ---

TEST_P(Pool, AdaptiveAvgPoolWithOverlappingWindows) {
  // 3 -> 2: windows [0, 2) and [1, 3) in each direction.
  const Tensor out = F::adaptive_avg_pool2d(iota({1, 1, 3, 3}), 2);
  EXPECT_EQ(out.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(out.to_vector<double>(), (V{2, 3, 5, 6}));
}

TEST_P(Pool, AdaptiveAvgPoolWithNonDivisibleSizes) {
  // 5 -> 3 rows: [0, 2), [1, 4), [3, 5); 7 -> 2 columns: [0, 4), [3, 7). Input value = 10 * row + column.
  std::vector<double> v;
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 7; ++c) v.push_back(10.0 * r + c);
  const Tensor out = F::adaptive_avg_pool2d(from(v, {1, 1, 5, 7}), {3, 2});
  EXPECT_EQ(out.shape(), (Shape{1, 1, 3, 2}));
  // Row means 0.5, 2, 3.5 (times 10); column means 1.5, 4.5.
  const std::vector<double> got = out.to_vector<double>();
  const V want{5 + 1.5, 5 + 4.5, 20 + 1.5, 20 + 4.5, 35 + 1.5, 35 + 4.5};
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST_P(Pool, AdaptiveAvgPoolToOneIsTheGlobalMeanAndToTheInputSizeIsIdentity) {
  const Tensor x = deterministic_tensor({2, 3, 5, 4}, DType::F64, device(), 3);
  const std::vector<double> global = F::adaptive_avg_pool2d(x, 1).to_vector<double>();
  const std::vector<double> means = mean(x, {2, 3}).to_vector<double>();
  ASSERT_EQ(global.size(), 6u);
  for (std::size_t i = 0; i < global.size(); ++i) EXPECT_NEAR(global[i], means[i], 1e-14);
  EXPECT_EQ(F::adaptive_avg_pool2d(x, {5, 4}).to_vector<double>(), x.to_vector<double>());
}

TEST_P(Pool, AdaptiveAvgPoolPassesGradcheck) {
  Tensor x = deterministic_tensor({2, 2, 5, 7}, DType::F64, device(), 4);
  x.requires_grad_();
  expect_gradcheck([](const Inputs& in) { return F::adaptive_avg_pool2d(in[0], {3, 2}); }, {x}, "5x7 -> 3x2");
  expect_gradcheck(
      [](const Inputs& in) {
        return F::adaptive_avg_pool2d(in[0], {4, 9});
      },
      {x}, "5x7 -> 4x9 (upsampling)");
  expect_gradcheck([](const Inputs& in) { return F::adaptive_avg_pool2d(in[0], 1); }, {x}, "global");
}

// --- every op ---

TEST_P(Pool, NonContiguousInputsAreRead) {
  const Tensor stored = deterministic_tensor({2, 5, 6, 3}, DType::F32, device(), 5);  // NHWC
  const Tensor x = stored.permute({0, 3, 1, 2});
  ASSERT_FALSE(x.is_contiguous());
  const Tensor dense = x.contiguous();
  EXPECT_EQ(F::max_pool2d(x, 2).to_vector<double>(), F::max_pool2d(dense, 2).to_vector<double>());
  EXPECT_EQ(F::avg_pool2d(x, 3, 1, 1).to_vector<double>(), F::avg_pool2d(dense, 3, 1, 1).to_vector<double>());
  EXPECT_EQ(F::adaptive_avg_pool2d(x, 4).to_vector<double>(), F::adaptive_avg_pool2d(dense, 4).to_vector<double>());
}

TEST_P(Pool, F64AndF32Agree) {
  const Tensor x = deterministic_tensor({2, 3, 9, 8}, DType::F64, device(), 6);
  const Tensor x32 = x.to(DType::F32);
  const auto close = [](const Tensor& a, const Tensor& b) {
    const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
    ASSERT_EQ(va.size(), vb.size());
    for (std::size_t i = 0; i < va.size(); ++i) ASSERT_NEAR(va[i], vb[i], 1e-6) << i;
  };
  close(F::max_pool2d(x, 3, 2, 1), F::max_pool2d(x32, 3, 2, 1));
  close(F::avg_pool2d(x, 3, 2, 1), F::avg_pool2d(x32, 3, 2, 1));
  close(F::adaptive_avg_pool2d(x, {4, 3}), F::adaptive_avg_pool2d(x32, {4, 3}));
}

TEST_P(Pool, BadArgumentsAreRejected) {
  const Tensor x = zeros({1, 2, 4, 4}, opts());
  expect_error<ShapeError>([&] { F::max_pool2d(zeros({2, 4, 4}, opts()), 2); }, {"max_pool2d", "4-D", "[2, 4, 4]"});
  expect_error<ShapeError>([&] { F::avg_pool2d(zeros({2, 4, 4}, opts()), 2); }, {"avg_pool2d", "4-D", "[2, 4, 4]"});
  expect_error<ShapeError>([&] { F::adaptive_avg_pool2d(zeros({4, 4}, opts()), 2); },
                           {"adaptive_avg_pool2d", "4-D", "[4, 4]"});
  expect_error<InvalidArgumentError>([&] { F::max_pool2d(x, 0); }, {"max_pool2d", "kernel size", "(0, 0)"});
  expect_error<InvalidArgumentError>([&] { F::avg_pool2d(x, 2, F::Pair(0, 1)); }, {"avg_pool2d", "stride", "(0, 1)"});
  expect_error<InvalidArgumentError>([&] { F::max_pool2d(x, 2, 2, -1); }, {"max_pool2d", "padding", "(-1, -1)"});
  expect_error<InvalidArgumentError>([&] { F::max_pool2d(x, 2, 2, 2); }, {"max_pool2d", "half the kernel", "(2, 2)"});
  expect_error<InvalidArgumentError>([&] { F::avg_pool2d(x, 3, 1, {1, 2}); }, {"avg_pool2d", "half the kernel"});
  expect_error<ShapeError>([&] { F::max_pool2d(x, 5); }, {"max_pool2d", "larger than the padded input", "[1, 2, 4, 4]"});
  expect_error<ShapeError>([&] { F::avg_pool2d(x, {2, 7}, 1, {1, 1}); }, {"avg_pool2d", "larger than the padded input"});
  expect_error<InvalidArgumentError>([&] { F::adaptive_avg_pool2d(x, {0, 2}); },
                                     {"adaptive_avg_pool2d", "output size", "(0, 2)"});
  expect_error<DTypeError>([&] { F::max_pool2d(zeros({1, 1, 2, 2}, opts(DType::I64)), 2); }, {"max_pool2d", "i64"});
  expect_error<DTypeError>([&] { F::adaptive_avg_pool2d(zeros({1, 1, 2, 2}, opts(DType::I32)), 1); },
                           {"adaptive_avg_pool2d", "i32"});
  expect_error<InvalidArgumentError>([&] { F::avg_pool2d(Tensor(), 2); }, {"avg_pool2d"});
}

TEST_P(Pool, EmptyBatchGivesAnEmptyOutput) {
  EXPECT_EQ(F::max_pool2d(zeros({0, 3, 4, 4}, opts()), 2).shape(), (Shape{0, 3, 2, 2}));
  EXPECT_EQ(F::avg_pool2d(zeros({2, 0, 4, 4}, opts()), 2).shape(), (Shape{2, 0, 2, 2}));
  EXPECT_EQ(F::adaptive_avg_pool2d(zeros({0, 3, 4, 4}, opts()), 3).shape(), (Shape{0, 3, 3, 3}));
}

INSTANTIATE_TEST_SUITE_P(Devices, Pool, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
