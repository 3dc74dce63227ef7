// scaled_dot_product_attention: the fused kernels against the composed formula (values and gradients, on shapes
// that cross the kernels' blocks), gradcheck in f64, masks, causal masking, dropout's mask in both passes, and the
// argument errors PyTorch gives.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "test_checks.h"
#include "test_devices.h"
#include "test_fixtures.h"

namespace strata {
namespace {

namespace F = nn::functional;
using F::AttentionImpl;
using Inputs = std::vector<Tensor>;
using testing::expect_gradcheck;

class Attention : public testing::SeededDeviceTest {
 protected:
  Tensor f32_leaf(const Shape& shape) const {
    Tensor t = randn(shape, f32());
    t.requires_grad_();
    return t;
  }
};

Shape shape_of(Shape batch, int64_t a, int64_t b) {
  batch.push_back(a);
  batch.push_back(b);
  return batch;
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = got.to(DType::F64).to_vector<double>(), w = want.to(DType::F64).to_vector<double>();
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double err = std::abs(g[i] - w[i]) / (1.0 + std::abs(w[i]));
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": element " << at << " is " << g[at] << ", composed gives " << w[at];
}

struct Case {
  Shape batch;
  int64_t L, S, E, Ev;
};

// Shapes on either side of the CPU's 64 x 64 blocks, L != S, E = 1, with and without batch dims.
const std::vector<Case> kCases = {
    {{2, 3}, 5, 7, 4, 3}, {{1}, 130, 70, 1, 5}, {{}, 65, 129, 16, 8}, {{3}, 64, 64, 32, 32}, {{2}, 1, 200, 8, 2}};

enum class MaskKind { kNone, kCausal, kBool, kAdditive };

// Runs both implementations with the same inputs and upstream gradient; compares outputs and gradients.
void compare_fused_with_composed(Device device, const Case& c, MaskKind kind, std::optional<double> scale) {
  const TensorOptions f32 = TensorOptions(DType::F32).device(device);
  const Tensor q0 = randn(shape_of(c.batch, c.L, c.E), f32), k0 = randn(shape_of(c.batch, c.S, c.E), f32);
  const Tensor v0 = randn(shape_of(c.batch, c.S, c.Ev), f32), up = randn(shape_of(c.batch, c.L, c.Ev), f32);
  Tensor mask;
  if (kind == MaskKind::kBool) {
    // Broadcast over the batch; key 0 always takes part, so that no row is masked entirely.
    mask = gt(rand({c.L, c.S}, f32), scalar_tensor(0.3, f32));
    mask = logical_or(mask, lt(arange(0, c.S, 1, TensorOptions(DType::I64).device(device)).reshape({1, c.S}),
                               scalar_tensor(int64_t{1}, TensorOptions(DType::I64).device(device))));
  } else if (kind == MaskKind::kAdditive) {
    mask = randn({c.L, 1}, f32) + randn({c.S}, f32);  // [L, S], from broadcasting
  }
  std::vector<Tensor> grads[2], outs;
  for (const AttentionImpl impl : {AttentionImpl::kFused, AttentionImpl::kComposed}) {
    Tensor q = q0.detach(), k = k0.detach(), v = v0.detach();
    for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
    const Tensor out = F::scaled_dot_product_attention(q, k, v, mask, 0.0, kind == MaskKind::kCausal, scale, impl);
    out.backward(up);
    outs.push_back(out.detach());
    grads[outs.size() - 1] = {q.grad(), k.grad(), v.grad()};
  }
  const std::string what =
      fmt::format("batch {} L {} S {} E {} Ev {} mask {}", c.batch, c.L, c.S, c.E, c.Ev, static_cast<int>(kind));
  expect_close(outs[0], outs[1], 2e-5, what + " output");
  const char* names[] = {"grad q", "grad k", "grad v"};
  for (int i = 0; i < 3; ++i) expect_close(grads[0][i], grads[1][i], 5e-5, what + " " + names[i]);
}

TEST_P(Attention, FusedMatchesComposedOnOddShapes) {
  for (const Case& c : kCases) {
    for (MaskKind kind : {MaskKind::kNone, MaskKind::kCausal, MaskKind::kBool, MaskKind::kAdditive}) {
      compare_fused_with_composed(device(), c, kind, std::nullopt);
    }
  }
  compare_fused_with_composed(device(), kCases[0], MaskKind::kNone, 0.3);
  compare_fused_with_composed(device(), kCases[2], MaskKind::kCausal, 2.0);
}

TEST_P(Attention, GradcheckInF64) {
  const Tensor bool_mask = gt(rand({5, 6}, TensorOptions(DType::F32).device(device())),
                              scalar_tensor(0.4, TensorOptions(DType::F32).device(device())));
  // Every row keeps key 5, so none is masked entirely.
  const Tensor keep_last = eq(arange(0, 6, 1, TensorOptions(DType::I64).device(device())).reshape({1, 6}),
                              scalar_tensor(int64_t{5}, TensorOptions(DType::I64).device(device())));
  const Tensor mask = logical_or(bool_mask, keep_last);
  const Tensor additive = randn({2, 1, 5, 6}, TensorOptions(DType::F64).device(device()));
  const auto f = [](Tensor m, bool causal, std::optional<double> scale) {
    return [m, causal, scale](const Inputs& in) {
      return F::scaled_dot_product_attention(in[0], in[1], in[2], m, 0.0, causal, scale);
    };
  };
  const Shape qs{2, 3, 5, 4}, ks{2, 3, 6, 4}, vs{2, 3, 6, 3};
  expect_gradcheck(f({}, false, std::nullopt), {leaf(qs), leaf(ks), leaf(vs)}, "plain");
  expect_gradcheck(f({}, true, std::nullopt), {leaf(qs), leaf(ks), leaf(vs)}, "causal");
  expect_gradcheck(f(mask, false, 0.7), {leaf(qs), leaf(ks), leaf(vs)}, "bool mask, scale 0.7");
  expect_gradcheck(f(additive, false, std::nullopt), {leaf(qs), leaf(ks), leaf(vs)}, "additive mask");
  // Across the CPU's blocks, causal, with a query longer than the keys.
  expect_gradcheck(f({}, true, std::nullopt), {leaf({70, 2}), leaf({66, 2}), leaf({66, 1})}, "causal, 70 x 66");
  // Batch dims that broadcast: the gradients sum over the broadcast ones.
  expect_gradcheck(f({}, false, std::nullopt), {leaf({2, 1, 3, 2}), leaf({1, 2, 4, 2}), leaf({4, 2})}, "broadcast");
}

TEST_P(Attention, CausalMasksLaterKeys) {
  // With v = identity rows, each output row is that query's probabilities: zero above the diagonal.
  const Tensor q = randn({6, 3}, f32()), k = randn({4, 3}, f32());
  const Tensor v = eye(4, -1, f32());
  const std::vector<float> p = F::scaled_dot_product_attention(q, k, v, {}, 0.0, true).to_vector<float>();
  for (int64_t i = 0; i < 6; ++i) {
    float row = 0;
    for (int64_t j = 0; j < 4; ++j) {
      if (j > i) EXPECT_EQ(p[i * 4 + j], 0.0f) << i << ", " << j;
      row += p[i * 4 + j];
    }
    EXPECT_NEAR(row, 1.0f, 1e-6) << "row " << i;
  }
  EXPECT_FLOAT_EQ(p[0], 1.0f) << "the first query sees only the first key";
}

TEST_P(Attention, ARowThatNoKeyMayAttendToGivesZeros) {
  const Tensor q0 = randn({3, 4}, f32()), k0 = randn({5, 4}, f32()), v0 = randn({5, 2}, f32());
  std::vector<uint8_t> allowed(15, 1);
  for (int j = 0; j < 5; ++j) allowed[5 + j] = 0;  // row 1: nothing
  const Tensor mask = tensor<uint8_t>(allowed, {3, 5}, device()).to(DType::Bool);
  for (const AttentionImpl impl : {AttentionImpl::kFused, AttentionImpl::kComposed}) {
    Tensor q = q0.detach(), k = k0.detach(), v = v0.detach();
    for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
    const Tensor out = F::scaled_dot_product_attention(q, k, v, mask, 0.0, false, std::nullopt, impl);
    const std::vector<float> o = out.to_vector<float>();
    EXPECT_EQ(o[2], 0.0f);
    EXPECT_EQ(o[3], 0.0f);
    EXPECT_NE(o[0], 0.0f);
    sum(out).backward();
    const std::vector<float> gq = q.grad().to_vector<float>();
    for (int e = 0; e < 4; ++e) EXPECT_EQ(gq[4 + e], 0.0f);
    for (float g : k.grad().to_vector<float>()) EXPECT_TRUE(std::isfinite(g));
  }
}

TEST_P(Attention, DropoutIsSeededAndBothPassesUseOneMask) {
  const Tensor q0 = randn({2, 2, 70, 8}, f32()), k0 = randn({2, 2, 90, 8}, f32()), v0 = randn({2, 2, 90, 5}, f32());
  const Tensor up = randn({2, 2, 70, 5}, f32());
  const auto run = [&](AttentionImpl impl, uint64_t seed) {
    Tensor q = q0.detach(), k = k0.detach(), v = v0.detach();
    for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
    default_generator(device()).manual_seed(seed);
    const Tensor out = F::scaled_dot_product_attention(q, k, v, {}, 0.3, false, std::nullopt, impl);
    out.backward(up);
    return std::vector<Tensor>{out.detach(), q.grad(), k.grad(), v.grad()};
  };
  const std::vector<Tensor> a = run(AttentionImpl::kFused, 5), b = run(AttentionImpl::kFused, 5);
  const std::vector<Tensor> c = run(AttentionImpl::kFused, 6);
  EXPECT_EQ(a[0].to_vector<float>(), b[0].to_vector<float>()) << "the same seed gives the same result";
  EXPECT_NE(a[0].to_vector<float>(), c[0].to_vector<float>()) << "another seed another mask";
  // The kernel draws the numbers that dropout() draws on the composed path from the same generator state, so the
  // two agree, gradients included: the backward pass regenerated the forward pass's mask.
  const std::vector<Tensor> composed = run(AttentionImpl::kComposed, 5);
  const char* names[] = {"output", "grad q", "grad k", "grad v"};
  for (int i = 0; i < 4; ++i) expect_close(a[i], composed[i], 5e-5, std::string("dropout ") + names[i]);
  // And the mask is not all or nothing: the output differs from dropout-free attention.
  const Tensor plain = F::scaled_dot_product_attention(q0, k0, v0);
  EXPECT_NE(a[0].to_vector<float>(), plain.to_vector<float>());
  // In f64, gradcheck with the generator reseeded before each evaluation (the same mask every time).
  const Device dev = device();
  expect_gradcheck(
      [dev](const Inputs& in) {
        default_generator(dev).manual_seed(11);
        return F::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.4, true);
      },
      {leaf({2, 7, 3}), leaf({2, 9, 3}), leaf({2, 9, 2})}, "dropout");
}

TEST_P(Attention, DropoutOfOneGivesZeros) {
  const Tensor out =
      F::scaled_dot_product_attention(randn({3, 4}, f32()), randn({5, 4}, f32()), randn({5, 2}, f32()), {}, 1.0);
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>(6, 0.0f));
}

TEST_P(Attention, ReducedPrecisionIsComputedInF32) {
  for (DType dtype : {DType::BF16, DType::F16}) {
    const Tensor q = randn({2, 9, 8}, f32()), k = randn({2, 11, 8}, f32()), v = randn({2, 11, 4}, f32());
    const Tensor low = F::scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), {}, 0.0, true);
    EXPECT_EQ(low.dtype(), dtype);
    const Tensor want = F::scaled_dot_product_attention(q.to(dtype).to(DType::F32), k.to(dtype).to(DType::F32),
                                                        v.to(dtype).to(DType::F32), {}, 0.0, true);
    expect_close(low, want.to(dtype), 1e-2, std::string(dtype_name(dtype)));
  }
}

TEST_P(Attention, EmptyKeysGiveZeros) {
  Tensor q = f32_leaf({2, 3, 4});
  const Tensor out = F::scaled_dot_product_attention(q, zeros({2, 0, 4}, f32()), zeros({2, 0, 5}, f32()));
  EXPECT_EQ(out.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>(30, 0.0f));
}

TEST_P(Attention, BadArgumentsAreRefusedAsPyTorchRefusesThem) {
  const Tensor q = randn({2, 3, 4}, f32()), k = randn({2, 5, 4}, f32()), v = randn({2, 5, 6}, f32());
  using testing::expect_error;
  const auto sdpa = [](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m = {}, double p = 0.0,
                       bool causal = false) { return F::scaled_dot_product_attention(a, b, c, m, p, causal); };
  expect_error<ShapeError>([&] { sdpa(randn({4}, f32()), randn({4}, f32()), randn({4}, f32())); },
                           {"scaled_dot_product_attention", "at least 2-D", "[4]"});
  expect_error<ShapeError>([&] { sdpa(q, randn({2, 5, 3}, f32()), v); }, {"E = 4", "[2, 5, 3]"});
  expect_error<ShapeError>([&] { sdpa(q, k, randn({2, 4, 6}, f32())); }, {"same number of positions", "[2, 4, 6]"});
  expect_error<ShapeError>(
      [&] {
        sdpa(q, randn({3, 5, 4}, f32()), randn({3, 5, 6}, f32()));
      },
      {"scaled_dot_product_attention"});
  expect_error<DTypeError>([&] { sdpa(q, k.to(DType::F64), v); }, {"same dtype", "f32", "f64"});
  expect_error<DTypeError>([&] { sdpa(q.to(DType::I64), k.to(DType::I64), v.to(DType::I64)); }, {"floating"});
  expect_error<InvalidArgumentError>(
      [&] {
        sdpa(q, k, v, ones({3, 5}, TensorOptions(DType::Bool)), 0.0, true);
      },
      {"attn_mask or is_causal"});
  expect_error<DTypeError>(
      [&] {
        sdpa(q, k, v, ones({3, 5}, TensorOptions(DType::I64).device(device())));
      },
      {"attn_mask must be bool, f32", "i64"});
  expect_error<DTypeError>(
      [&] {
        sdpa(q, k, v, ones({3, 5}, TensorOptions(DType::F64).device(device())));
      },
      {"attn_mask", "f64"});
  expect_error<ShapeError>(
      [&] {
        sdpa(q, k, v, ones({3, 4}, TensorOptions(DType::Bool).device(device())));
      },
      {"attn_mask of shape [3, 4]", "[2, 3, 5]"});
  expect_error<ShapeError>(
      [&] {
        sdpa(q, k, v, ones({1, 2, 3, 5}, TensorOptions(DType::Bool).device(device())));
      },
      {"attn_mask of shape [1, 2, 3, 5]"});
  expect_error<InvalidArgumentError>([&] { sdpa(q, k, v, {}, 1.5); }, {"dropout_p must be in [0, 1], got 1.5"});
  expect_error<InvalidArgumentError>([&] { sdpa(q, Tensor(), v); }, {"defined"});
}

INSTANTIATE_TEST_SUITE_P(Devices, Attention, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
