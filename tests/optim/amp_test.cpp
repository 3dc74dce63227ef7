// Mixed precision: autocast's op lists (Note [Autocast]) and GradScaler's rules (Note [Loss scaling]).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "strata/core/error.h"
#include "strata/nn/attention.h"
#include "strata/nn/functional.h"
#include "strata/optim/grad_scaler.h"
#include "strata/optim/sgd.h"
#include "strata/tensor/autocast.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata {
namespace {

namespace F = nn::functional;

Tensor randn_f32(const Shape& shape, bool grad = false) {
  Tensor t = randn(shape);
  t.requires_grad_(grad);
  return t;
}

TEST(Autocast, ProductsRunInTheLowDtypeAndSoftmaxNormsAndLossesInF32) {
  const Tensor x = randn_f32({4, 8}), w = randn_f32({3, 8}), b = randn_f32({3});
  {
    amp::AutocastGuard autocast(DeviceType::CPU);  // bf16 by default on the CPU
    EXPECT_TRUE(amp::autocast_enabled(DeviceType::CPU));
    EXPECT_EQ(F::linear(x, w, b).dtype(), DType::BF16);
    EXPECT_EQ(matmul(x, w.t()).dtype(), DType::BF16);
    EXPECT_EQ(mm(x, w.t()).dtype(), DType::BF16);
    EXPECT_EQ(bmm(x.unsqueeze(0), w.t().unsqueeze(0)).dtype(), DType::BF16);
    EXPECT_EQ(addmm(b, x, w.t()).dtype(), DType::BF16);
    const Tensor q = randn_f32({2, 5, 8});
    EXPECT_EQ(F::scaled_dot_product_attention(q, q, q, Tensor(), 0.0, true).dtype(), DType::BF16);
    const Tensor image = randn_f32({1, 2, 5, 5}), kernel = randn_f32({3, 2, 3, 3});
    // The CPU has no bf16 convolution: f32, and a bf16 input goes back to f32.
    EXPECT_EQ(F::conv2d(image, kernel).dtype(), DType::F32);
    EXPECT_EQ(F::conv2d(image.to(DType::BF16), kernel).dtype(), DType::F32);

    const Tensor low = x.to(DType::BF16);
    EXPECT_EQ(softmax(low, 1).dtype(), DType::F32);
    EXPECT_EQ(log_softmax(low, 1).dtype(), DType::F32);
    EXPECT_EQ(F::layer_norm(low, {8}).dtype(), DType::F32);
    EXPECT_EQ(F::mse_loss(low, low).dtype(), DType::F32);
    EXPECT_EQ(F::cross_entropy(low, tensor<int64_t>({0, 1, 2, 0})).dtype(), DType::F32);

    // Others run as their inputs say; f64 is left alone, as PyTorch's autocast leaves it.
    EXPECT_EQ((low * 2).dtype(), DType::BF16);
    EXPECT_EQ(matmul(x.to(DType::F64), w.t().to(DType::F64)).dtype(), DType::F64);
    {
      amp::AutocastGuard off(DeviceType::CPU, std::nullopt, false);
      EXPECT_EQ(F::linear(x, w, b).dtype(), DType::F32);
    }
    EXPECT_EQ(F::linear(x, w, b).dtype(), DType::BF16);  // the inner guard restored the outer setting
    {
      amp::AutocastGuard half(DeviceType::CPU, DType::F16);
      EXPECT_EQ(F::linear(x, w, b).dtype(), DType::F16);
    }
  }
  EXPECT_FALSE(amp::autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(F::linear(x, w, b).dtype(), DType::F32);
}

TEST(Autocast, IsPerThreadAndPerDeviceType) {
  amp::AutocastGuard autocast(DeviceType::CPU);
  EXPECT_FALSE(amp::autocast_enabled(DeviceType::CUDA));
  DType other_thread = DType::Bool;
  std::thread([&] { other_thread = F::linear(randn_f32({2, 2}), randn_f32({2, 2})).dtype(); }).join();
  EXPECT_EQ(other_thread, DType::F32);
}

TEST(Autocast, GradientsReachTheF32ParametersInF32CloseToTheF32Ones) {
  const Tensor x = randn_f32({16, 32});
  const Tensor target = tensor<int64_t>({0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0});
  Tensor w = randn_f32({5, 32}, true);
  F::cross_entropy(F::linear(x, w), target).backward();
  const Tensor reference = w.grad().clone();
  w.set_grad(Tensor());
  Tensor loss;
  {
    amp::AutocastGuard autocast(DeviceType::CPU);
    loss = F::cross_entropy(F::linear(x, w), target);
  }
  EXPECT_EQ(loss.dtype(), DType::F32);
  loss.backward();
  ASSERT_EQ(w.grad().dtype(), DType::F32);
  const double error = max(abs(w.grad() - reference)).item<double>();
  const double size = max(abs(reference)).item<double>();
  EXPECT_GT(error, 0.0);  // it did compute in bf16
  EXPECT_LT(error, 0.03 * size);
}

TEST(Autocast, RefusesADtypeThatIsNotF16OrBf16) {
  try {
    amp::AutocastGuard bad(DeviceType::CPU, DType::F64);
    FAIL() << "accepted f64";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(amp::autocast_enabled(DeviceType::CPU));
}

// One parameter [1, -2] under SGD(lr 1): its gradient is d(loss)/dp.
struct Problem {
  Tensor p = tensor<float>({1.0f, -2.0f});
  optim::SGD sgd{{p}, 1.0};
  Problem() { p.requires_grad_(true); }
  void backward(amp::GradScaler& scaler, float a, float b) {
    scaler.scale(sum(p * tensor<float>({a, b}))).backward();
  }
};

TEST(GradScaler, ScalesTheLossUnscalesTheGradientsAndSteps) {
  Problem pr;
  amp::GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  pr.backward(scaler, 0.5f, -0.25f);
  EXPECT_EQ(pr.p.grad()[0].item<float>(), 0.5f * 65536.0f);
  EXPECT_TRUE(scaler.step(pr.sgd));
  EXPECT_EQ(pr.p.grad()[0].item<float>(), 0.5f);
  EXPECT_EQ(pr.p[0].item<float>(), 0.5f);
  EXPECT_EQ(pr.p[1].item<float>(), -1.75f);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScaler, SkipsAStepWithAnInfOrNanAndBacksOffThenGrowsAfterTheInterval) {
  amp::GradScalerOptions options;
  options.init_scale = 8.0;
  options.growth_interval = 3;
  amp::GradScaler scaler(options);
  for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    Problem pr;
    pr.backward(scaler, bad, 1.0f);
    EXPECT_FALSE(scaler.step(pr.sgd));
    EXPECT_EQ(pr.p[0].item<float>(), 1.0f);  // not stepped
    EXPECT_EQ(pr.p[1].item<float>(), -2.0f);
    scaler.update();
  }
  EXPECT_EQ(scaler.get_scale(), 2.0);
  Problem pr;
  for (int i = 0; i < 3; ++i) {
    pr.p.set_grad(Tensor());
    pr.backward(scaler, 1.0f, 1.0f);
    EXPECT_TRUE(scaler.step(pr.sgd));
    scaler.update();
  }
  EXPECT_EQ(scaler.get_scale(), 4.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  scaler.update(1024.0);
  EXPECT_EQ(scaler.get_scale(), 1024.0);
}

TEST(GradScaler, UnscaleBeforeClippingThenStepUnscalesOnce) {
  Problem pr;
  amp::GradScaler scaler;
  pr.backward(scaler, 3.0f, 4.0f);
  scaler.unscale_(pr.sgd);
  EXPECT_EQ(pr.p.grad()[1].item<float>(), 4.0f);
  EXPECT_THROW(scaler.unscale_(pr.sgd), InvalidArgumentError);
  EXPECT_TRUE(scaler.step(pr.sgd));
  EXPECT_EQ(pr.p[1].item<float>(), -6.0f);
  EXPECT_THROW(scaler.step(pr.sgd), InvalidArgumentError);
  EXPECT_THROW(scaler.unscale_(pr.sgd), InvalidArgumentError);
  scaler.update();
  EXPECT_THROW(scaler.update(), InvalidArgumentError);  // nothing unscaled since
}

TEST(GradScaler, StateRoundTripsAndBadOptionsAreRefused) {
  amp::GradScalerOptions options;
  options.growth_interval = 5;
  amp::GradScaler a(options);
  Problem pr;
  pr.backward(a, 1.0f, 1.0f);
  a.step(pr.sgd);
  a.update();
  a.update(512.0);
  amp::GradScaler b;
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.get_scale(), 512.0);
  EXPECT_EQ(b.options().growth_interval, 5);
  EXPECT_EQ(b.growth_tracker(), 1);

  amp::GradScalerOptions bad;
  bad.init_scale = -1.0;
  EXPECT_THROW(amp::GradScaler{bad}, InvalidArgumentError);
  bad = {};
  bad.backoff_factor = 1.5;
  EXPECT_THROW(amp::GradScaler{bad}, InvalidArgumentError);
  EXPECT_THROW(b.update(std::numeric_limits<double>::infinity()), InvalidArgumentError);
}

TEST(GradScaler, DisabledPassesThroughAndF16GradientsAreRefused) {
  amp::GradScalerOptions off;
  off.enabled = false;
  amp::GradScaler scaler(off);
  Problem pr;
  pr.backward(scaler, 1.0f, 2.0f);
  EXPECT_EQ(pr.p.grad()[1].item<float>(), 2.0f);
  EXPECT_TRUE(scaler.step(pr.sgd));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.state_dict().empty());

  Tensor h = tensor<float>({1.0f}).to(DType::F16);
  h.requires_grad_(true);
  optim::SGD sgd({h}, 0.1);
  amp::GradScaler on;
  on.scale(sum(h * 2).to(DType::F32)).backward();
  EXPECT_THROW(on.unscale_(sgd), DTypeError);
}

}  // namespace
}  // namespace strata
