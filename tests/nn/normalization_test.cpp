// batch_norm and layer_norm: hand-computed values, running statistics, gradients and argument errors; the fused
// layer_norm against its composition from tensor ops (values and gradients, every floating dtype, weight and bias
// absent or present, non-contiguous inputs, the same bits on any number of threads).
#include "strata/nn/normalization.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/backends/portable/layer_norm_ops.h"
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

// --- the fused layer_norm against the composed one ---

struct LayerNormResult {
  Tensor y, gx, gw, gb;
};

/// layer_norm of `x` (with weight and bias when asked) and the gradients of sum(y * g) for a fixed g.
LayerNormResult run_layer_norm(const Tensor& x_in, const Shape& normalized, bool with_weight, bool with_bias,
                               F::LayerNormImpl impl, DType param_dtype) {
  const Device device = x_in.device();
  Tensor x = x_in.detach();
  x.requires_grad_();
  Tensor w, b;
  if (with_weight) {
    w = testing::deterministic_tensor(normalized, param_dtype, device, 7) + 1.0;
    w.requires_grad_();
  }
  if (with_bias) {
    b = testing::deterministic_tensor(normalized, param_dtype, device, 8);
    b.requires_grad_();
  }
  const Tensor y = F::layer_norm(x, normalized, w, b, 1e-5, impl);
  const Tensor g = testing::deterministic_tensor(y.shape(), y.dtype(), device, 9);
  sum(y * g).backward();
  return {y.detach(), x.grad(), w.defined() ? w.grad() : Tensor(), b.defined() ? b.grad() : Tensor()};
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!got.defined()) return;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  const auto a = got.to(DType::F64).to_vector<double>(), b = want.to(DType::F64).to_vector<double>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * (1.0 + std::abs(b[i]))) << what << ", element " << i;
  }
}

TEST_P(Normalization, LayerNormFusedMatchesComposed) {
  // Rows shorter and longer than the kernels' eight lanes, several normalized dims, nanoGPT's [12, 64, 128], and
  // a row of one element (variance 0).
  const std::vector<std::pair<Shape, Shape>> shapes = {{{3, 4}, {4}},          {{2, 3, 5}, {3, 5}}, {{7, 33}, {33}},
                                                       {{12, 64, 128}, {128}}, {{5, 1}, {1}},       {{1, 19}, {19}}};
  for (const DType dtype : {DType::F32, DType::F64}) {
    const double tol = dtype == DType::F64 ? 1e-10 : 2e-5;
    for (const auto& [shape, normalized] : shapes) {
      // Rows away from zero, where one pass of sums of x and x^2 would cancel.
      const Tensor x = testing::deterministic_tensor(shape, dtype, device(), 3) * 3.0 + 10.0;
      for (int affine = 0; affine < 4; ++affine) {
        const bool with_w = (affine & 1) != 0, with_b = (affine & 2) != 0;
        const std::string what =
            fmt::format("{} {} over {} weight {} bias {}", dtype, shape, normalized, with_w, with_b);
        const LayerNormResult fused = run_layer_norm(x, normalized, with_w, with_b, F::LayerNormImpl::kFused, dtype);
        const LayerNormResult ref = run_layer_norm(x, normalized, with_w, with_b, F::LayerNormImpl::kComposed, dtype);
        expect_close(fused.y, ref.y, tol, what + ": y");
        expect_close(fused.gx, ref.gx, tol, what + ": grad x");
        expect_close(fused.gw, ref.gw, tol, what + ": grad weight");
        expect_close(fused.gb, ref.gb, tol, what + ": grad bias");
      }
    }
  }
}

TEST_P(Normalization, LayerNormFusedComputesHalfPrecisionInF32) {
  // f16 and bf16 inputs: the result and gradients keep the dtype, and equal the f32 computation rounded.
  const Tensor x32 = testing::deterministic_tensor({6, 40}, DType::F32, device(), 4) * 2.0;
  for (const DType dtype : {DType::F16, DType::BF16}) {
    const double tol = dtype == DType::F16 ? 4e-3 : 3e-2;
    const Tensor x = x32.to(dtype);
    const LayerNormResult got = run_layer_norm(x, {40}, true, true, F::LayerNormImpl::kFused, dtype);
    const LayerNormResult ref = run_layer_norm(x.to(DType::F32), {40}, true, true, F::LayerNormImpl::kFused, dtype);
    const std::string what = fmt::format("{}", dtype);
    expect_close(got.y, ref.y.to(dtype), tol, what + ": y");
    expect_close(got.gx, ref.gx.to(dtype), tol, what + ": grad x");
    expect_close(got.gw, ref.gw, 4 * tol, what + ": grad weight");
    expect_close(got.gb, ref.gb, 4 * tol, what + ": grad bias");
  }
}

TEST_P(Normalization, LayerNormFusedPromotesAsTheComposition) {
  // An f32 input with f64 weight and bias gives f64, as (x - mean) * rstd * weight + bias does.
  const Tensor x = testing::deterministic_tensor({4, 6}, DType::F32, device(), 5);
  const LayerNormResult fused = run_layer_norm(x, {6}, true, true, F::LayerNormImpl::kFused, DType::F64);
  const LayerNormResult ref = run_layer_norm(x, {6}, true, true, F::LayerNormImpl::kComposed, DType::F64);
  EXPECT_EQ(fused.y.dtype(), DType::F64);
  EXPECT_EQ(fused.gx.dtype(), DType::F32);
  expect_close(fused.y, ref.y, 2e-6, "y");
  expect_close(fused.gx, ref.gx, 2e-5, "grad x");
  expect_close(fused.gw, ref.gw, 2e-6, "grad weight");
  expect_close(fused.gb, ref.gb, 2e-6, "grad bias");
}

TEST_P(Normalization, LayerNormFusedAcceptsANonContiguousInput) {
  const Tensor x = testing::deterministic_tensor({9, 5}, DType::F64, device(), 6).t();  // [5, 9]
  ASSERT_FALSE(x.is_contiguous());
  const LayerNormResult got = run_layer_norm(x, {9}, true, true, F::LayerNormImpl::kFused, DType::F64);
  const LayerNormResult ref = run_layer_norm(x.contiguous(), {9}, true, true, F::LayerNormImpl::kFused, DType::F64);
  expect_close(got.y, ref.y, 1e-14, "y");
  expect_close(got.gx, ref.gx, 1e-14, "grad x");
  expect_close(got.gw, ref.gw, 1e-14, "grad weight");
  Tensor leaf_t = randn({4, 3}, TensorOptions(DType::F64).device(device())).t();
  leaf_t.requires_grad_();
  expect_gradcheck([](const Inputs& in) { return F::layer_norm(in[0], {4}); }, {leaf_t});
}

TEST_P(Normalization, LayerNormGradientsWithWeightOrBiasAlone) {
  expect_gradcheck([](const Inputs& x) { return F::layer_norm(x[0], {5}, x[1]); }, {leaf({3, 5}), leaf({5})});
  expect_gradcheck([](const Inputs& x) { return F::layer_norm(x[0], {5}, {}, x[1]); }, {leaf({3, 5}), leaf({5})});
  // Only the weight requires grad: the kernel writes no grad_x.
  Tensor w = leaf({5});
  const Tensor x = randn({3, 5}, TensorOptions(DType::F64).device(device()));
  expect_gradcheck([&x](const Inputs& in) { return F::layer_norm(x, {5}, in[0]); }, {w});
}

TEST_P(Normalization, LayerNormOfAnEmptyInputIsEmpty) {
  Tensor x = zeros({0, 4}, f32());
  x.requires_grad_();
  const Tensor y = F::layer_norm(x, {4});
  EXPECT_EQ(y.shape(), (Shape{0, 4}));
  sum(y).backward();
  EXPECT_EQ(x.grad().shape(), (Shape{0, 4}));
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

TEST(LayerNormThreads, GradientsAreTheSameBitsOnAnyNumberOfThreads) {
  // weight's and bias's gradients sum over rows in chunks fixed by the shape (Note [How layer_norm runs]); [512, 96]
  // is large enough for the pool.
  namespace F = nn::functional;
  const auto grads = [](int threads) {
    const testing::PoolSize pool(threads);
    Tensor x = testing::deterministic_tensor({512, 96}, DType::F32, kCPU, 1);
    Tensor w = testing::deterministic_tensor({96}, DType::F32, kCPU, 2), b = zeros({96});
    for (Tensor* t : {&x, &w, &b}) t->requires_grad_();
    const Tensor y = F::layer_norm(x, {96}, w, b);
    sum(y * testing::deterministic_tensor({512, 96}, DType::F32, kCPU, 3)).backward();
    return std::vector<std::vector<float>>{y.detach().to_vector<float>(), x.grad().to_vector<float>(),
                                           w.grad().to_vector<float>(), b.grad().to_vector<float>()};
  };
  EXPECT_EQ(grads(1), grads(2));
  EXPECT_EQ(grads(1), grads(3));
}

TEST(LayerNormKernels, TheGpuPlanOfTheBackwardMatchesTheCpus) {
  // The GPU's backward passes (grad_x a block per row, column partials in chunks of 32 rows, then their sums), run
  // on the CPU, against the CPU's chunks: 100 rows make four GPU chunks, the last one short.
  const int64_t rows = 100, n = 37;
  const ops::OpCall call{"layer_norm_backward", kCPU, nullptr, std::source_location::current()};
  const kernels::LaunchSite site(kCPU, nullptr, "layer_norm_backward", "layer_norm_backward");
  for (const DType dtype : {DType::F32, DType::F64}) {
    const Tensor x = testing::deterministic_tensor({rows, n}, dtype, kCPU, 1) * 2.0 + 1.0;
    const Tensor g = testing::deterministic_tensor({rows, n}, dtype, kCPU, 2);
    const Tensor w = testing::deterministic_tensor({n}, dtype, kCPU, 3);
    const TensorOptions stats(dtype == DType::F64 ? DType::F64 : DType::F32);
    const Tensor mean = empty({rows}, stats), rstd = empty({rows}, stats), y = empty({rows, n}, TensorOptions(dtype));
    portable::layer_norm_forward_kernel(call, y.view(), mean.view(), rstd.view(), x.view(), w.view(), TensorView{},
                                        1e-5);
    for (const bool with_weight : {true, false}) {
      for (const bool want_x : {true, false}) {
        std::vector<std::vector<double>> results[2];
        for (const bool gpu_plan : {false, true}) {
          const Tensor gx = empty({rows, n}, TensorOptions(dtype)), gw = empty({n}, TensorOptions(dtype)),
                       gb = empty({n}, TensorOptions(dtype));
          const TensorView wv = with_weight ? w.view() : TensorView{};
          const TensorView gxv = want_x ? gx.view() : TensorView{};
          if (dtype == DType::F32) {
            portable::run_layer_norm_backward<float>(site, gxv, gw.view(), gb.view(), g.view(), x.view(), mean.view(),
                                                     rstd.view(), wv, gpu_plan);
          } else {
            portable::run_layer_norm_backward<double>(site, gxv, gw.view(), gb.view(), g.view(), x.view(), mean.view(),
                                                      rstd.view(), wv, gpu_plan);
          }
          for (const Tensor* t : {&gx, &gw, &gb}) {
            results[gpu_plan].push_back(want_x || t != &gx ? t->to(DType::F64).to_vector<double>()
                                                           : std::vector<double>{});
          }
        }
        const double tol = dtype == DType::F64 ? 1e-12 : 2e-5;
        for (std::size_t r = 0; r < 3; ++r) {
          ASSERT_EQ(results[0][r].size(), results[1][r].size());
          for (std::size_t i = 0; i < results[0][r].size(); ++i) {
            ASSERT_NEAR(results[1][r][i], results[0][r][i], tol * (1 + std::abs(results[0][r][i])))
                << dtype << " weight " << with_weight << " grad_x " << want_x << " output " << r << " element " << i;
          }
        }
      }
    }
  }
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
