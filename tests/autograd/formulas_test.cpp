// The derivative formulas of the tensors layer, checked against finite differences (autograd::gradcheck, f64).
#include <gtest/gtest.h>

#include <cmath>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "test_checks.h"

namespace strata {
namespace {

using Inputs = std::vector<Tensor>;
using testing::expect_gradcheck;

class Formulas : public ::testing::Test {
 protected:
  void SetUp() override { default_generator(kCPU).manual_seed(42); }
};

/// A leaf of standard normal values that requires grad.
Tensor leaf(const Shape& shape) {
  Tensor t = randn(shape, DType::F64);
  t.requires_grad_();
  return t;
}

/// A leaf with values in [0.5, 2.5) (for log, sqrt, pow...).
Tensor positive(const Shape& shape) {
  Tensor t = rand(shape, DType::F64) * 2.0 + 0.5;
  t.requires_grad_();
  return t;
}

/// A non-contiguous leaf of shape `shape` (2-D): the transpose of a contiguous tensor.
Tensor transposed_leaf(const Shape& shape) {
  Tensor t = randn({shape[1], shape[0]}, DType::F64).t();
  EXPECT_FALSE(t.is_contiguous());
  t.requires_grad_();
  return t;
}

TEST_F(Formulas, BinaryArithmeticWithBroadcasting) {
  const Tensor a = leaf({2, 3}), b = leaf({3}), c = leaf({2, 1});
  expect_gradcheck([](const Inputs& x) { return add(x[0], x[1]); }, {a, b});
  expect_gradcheck([](const Inputs& x) { return add(x[0], x[1], 2.5); }, {a, c});
  expect_gradcheck([](const Inputs& x) { return sub(x[0], x[1], 0.5); }, {a, b});
  expect_gradcheck([](const Inputs& x) { return mul(x[0], x[1]); }, {c, b});
  expect_gradcheck([](const Inputs& x) { return x[0] / x[1]; }, {a, positive({2, 1})});
  expect_gradcheck([](const Inputs& x) { return pow(x[0], x[1]); }, {positive({2, 3}), leaf({3})});
  expect_gradcheck([](const Inputs& x) { return pow(x[0], 3); }, {a});
  expect_gradcheck([](const Inputs& x) { return pow(x[0], -1.5); }, {positive({2, 3})});
  expect_gradcheck([](const Inputs& x) { return maximum(x[0], x[1]); }, {a, b});
  expect_gradcheck([](const Inputs& x) { return minimum(x[0], x[1]); }, {a, c});
}

TEST_F(Formulas, OnlyInputsThatRequireGradGetGradients) {
  Tensor a = leaf({2, 3});
  const Tensor b = randn({2, 3}, DType::F64);
  sum(a * b).backward();
  EXPECT_TRUE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  EXPECT_EQ(a.grad().to_vector<double>(), b.to_vector<double>());
}

TEST_F(Formulas, GradientOfAnF32InputIsF32) {
  Tensor a = randn({3}, DType::F32);
  a.requires_grad_();
  const Tensor b = randn({3}, DType::F64);
  sum(a * b).backward();  // promoted to f64; the gradient goes back as f32
  EXPECT_EQ(a.grad().dtype(), DType::F32);
}

TEST_F(Formulas, MaximumSplitsTiesEvenly) {
  Tensor a = tensor<double>({1, 2});
  Tensor b = tensor<double>({1, 3});
  a.requires_grad_();
  b.requires_grad_();
  sum(maximum(a, b)).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0.5, 0}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{0.5, 1}));
}

TEST_F(Formulas, UnaryOps) {
  const Tensor a = leaf({2, 3}), p = positive({2, 3});
  expect_gradcheck([](const Inputs& x) { return -x[0]; }, {a});
  expect_gradcheck([](const Inputs& x) { return abs(x[0]); }, {a});
  expect_gradcheck([](const Inputs& x) { return exp(x[0]); }, {a});
  expect_gradcheck([](const Inputs& x) { return log(x[0]); }, {p});
  expect_gradcheck([](const Inputs& x) { return sqrt(x[0]); }, {p});
  expect_gradcheck([](const Inputs& x) { return rsqrt(x[0]); }, {p});
  expect_gradcheck([](const Inputs& x) { return tanh(x[0]); }, {a});
  expect_gradcheck([](const Inputs& x) { return sigmoid(x[0]); }, {a});
  expect_gradcheck([](const Inputs& x) { return relu(x[0]); }, {a});
  expect_gradcheck([](const Inputs& x) { return gelu(x[0]); }, {a});
  expect_gradcheck([](const Inputs& x) { return clamp(x[0], -0.5, 0.5); }, {a});
  expect_gradcheck([](const Inputs& x) { return clamp(x[0], std::nullopt, 0.1); }, {a});
}

TEST_F(Formulas, GeluAtZero) {
  Tensor a = tensor<double>({0.0});
  a.requires_grad_();
  sum(gelu(a)).backward();
  EXPECT_DOUBLE_EQ(a.grad().item<double>(), 0.5);
}

TEST_F(Formulas, WhereSendsGradientsToTheChosenSide) {
  const Tensor cond = gt(randn({2, 3}, DType::F64), scalar_tensor(0.0, DType::F64));
  expect_gradcheck([cond](const Inputs& x) { return where(cond, x[0], x[1]); }, {leaf({2, 3}), leaf({3})});
  Tensor a = tensor<double>({1, 2}), b = tensor<double>({3, 4});
  a.requires_grad_();
  b.requires_grad_();
  sum(where(tensor<bool>({true, false}), a, b)).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{1, 0}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{0, 1}));
}

TEST_F(Formulas, ScalarOperators) {
  const Tensor a = leaf({2, 3});
  expect_gradcheck([](const Inputs& x) { return x[0] + 2.0; }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0] - 2.0; }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0] * 3.0; }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0] / 4.0; }, {a});
  expect_gradcheck([](const Inputs& x) { return 2.0 + x[0]; }, {a});
  expect_gradcheck([](const Inputs& x) { return 2.0 - x[0]; }, {a});
  expect_gradcheck([](const Inputs& x) { return 3.0 * x[0]; }, {a});
  expect_gradcheck([](const Inputs& x) { return 3.0 / x[0]; }, {positive({2, 3})});
}

TEST_F(Formulas, Reductions) {
  const Tensor a = leaf({2, 3, 4});
  expect_gradcheck([](const Inputs& x) { return sum(x[0]); }, {a});
  expect_gradcheck([](const Inputs& x) { return sum(x[0], {1}); }, {a});
  expect_gradcheck([](const Inputs& x) { return sum(x[0], {0, -1}, true); }, {a});
  expect_gradcheck([](const Inputs& x) { return mean(x[0]); }, {a});
  expect_gradcheck([](const Inputs& x) { return mean(x[0], {2}); }, {a});
  expect_gradcheck([](const Inputs& x) { return max(x[0], {1}); }, {a});
  expect_gradcheck([](const Inputs& x) { return min(x[0], {0, 2}, true); }, {a});
  expect_gradcheck([](const Inputs& x) { return max(x[0]); }, {a});
  expect_gradcheck([](const Inputs& x) { return var(x[0], {1}); }, {a});
  expect_gradcheck([](const Inputs& x) { return var(x[0], {}, false, true); }, {a});
  expect_gradcheck([](const Inputs& x) { return norm(x[0]); }, {a});
  expect_gradcheck([](const Inputs& x) { return norm(x[0], 2.0, {2}); }, {a});
  expect_gradcheck([](const Inputs& x) { return norm(x[0], 3.0, {1}, true); }, {a});
  expect_gradcheck([](const Inputs& x) { return logsumexp(x[0], {1}); }, {a});
  expect_gradcheck([](const Inputs& x) { return logsumexp(x[0], {0, 2}, true); }, {a});
  expect_gradcheck([](const Inputs& x) { return softmax(x[0], 1); }, {a});
  expect_gradcheck([](const Inputs& x) { return softmax(x[0], -1); }, {a});
  expect_gradcheck([](const Inputs& x) { return log_softmax(x[0], 0); }, {a});
  expect_gradcheck([](const Inputs& x) { return log_softmax(x[0], 2); }, {a});
}

TEST_F(Formulas, ReductionsOfNonContiguousInputs) {
  const Tensor a = transposed_leaf({3, 4});
  expect_gradcheck([](const Inputs& x) { return sum(x[0], {0}); }, {a});
  expect_gradcheck([](const Inputs& x) { return softmax(x[0], 0); }, {a});
  expect_gradcheck([](const Inputs& x) { return var(x[0], {1}); }, {a});
}

TEST_F(Formulas, MaxDividesTheGradientAmongTies) {
  Tensor a = tensor<double>({1, 3, 3, 2}, {2, 2});
  a.requires_grad_();
  sum(max(a, {1})).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 1, 1, 0}));
  Tensor b = tensor<double>({3, 1, 3});
  b.requires_grad_();
  max(b).backward();
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{0.5, 0, 0.5}));
}

TEST_F(Formulas, NormGradientIsZeroAtZero) {
  Tensor a = zeros({3}, DType::F64);
  a.requires_grad_();
  norm(a).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 0, 0}));
  Tensor b = leaf({3});
  EXPECT_THROW(norm(b, INFINITY), NotImplementedError);
}

TEST_F(Formulas, MatrixProducts) {
  expect_gradcheck([](const Inputs& x) { return mm(x[0], x[1]); }, {leaf({2, 3}), leaf({3, 4})});
  expect_gradcheck([](const Inputs& x) { return mm(x[0], x[1]); }, {transposed_leaf({2, 3}), transposed_leaf({3, 2})});
  expect_gradcheck([](const Inputs& x) { return bmm(x[0], x[1]); }, {leaf({2, 2, 3}), leaf({2, 3, 2})});
  expect_gradcheck([](const Inputs& x) { return matmul(x[0], x[1]); }, {leaf({3}), leaf({3})});
  expect_gradcheck([](const Inputs& x) { return matmul(x[0], x[1]); }, {leaf({3}), leaf({2, 3, 2})});
  expect_gradcheck([](const Inputs& x) { return matmul(x[0], x[1]); }, {leaf({2, 2, 3}), leaf({3})});
  // Broadcast batch dimensions: b is shared by every batch of a.
  expect_gradcheck([](const Inputs& x) { return matmul(x[0], x[1]); }, {leaf({2, 2, 3}), leaf({3, 2})});
  expect_gradcheck([](const Inputs& x) { return matmul(x[0], x[1]); }, {leaf({2, 1, 2, 3}), leaf({3, 3, 1})});
  expect_gradcheck([](const Inputs& x) { return addmm(x[0], x[1], x[2]); }, {leaf({3}), leaf({2, 4}), leaf({4, 3})});
  expect_gradcheck([](const Inputs& x) { return addmm(x[0], x[1], x[2], 0.5, 2.0); },
                   {leaf({2, 3}), leaf({2, 4}), leaf({4, 3})});
}

TEST_F(Formulas, OperandsStoredTransposedGetTheirGradientsFromTheTransposedProduct) {
  // linear's x @ w.t(): w.t()'s gradient is computed as (g^T x)^T, x's as usual; the values must not change.
  Tensor x = leaf({4, 3}), w = leaf({2, 3});
  const Tensor g = randn({4, 2}, DType::F64);
  mm(x, w.t()).backward(g);
  const std::vector<double> got = w.grad().to_vector<double>(), want = mm(g.t(), x.detach()).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  // The same for the left operand, stored transposed: y.t() @ w.t(), y's gradient (g w)^T.
  Tensor y = leaf({3, 4});
  mm(y.t(), w.t()).backward(g);
  const std::vector<double> got_y = y.grad().to_vector<double>(), want_y = mm(g, w.detach()).t().to_vector<double>();
  ASSERT_EQ(got_y.size(), want_y.size());
  for (std::size_t i = 0; i < got_y.size(); ++i) EXPECT_NEAR(got_y[i], want_y[i], 1e-12) << i;
}

TEST_F(Formulas, Indexing) {
  const Tensor index = tensor<int64_t>({2, 0, 2});
  expect_gradcheck([index](const Inputs& x) { return index_select(x[0], 1, index); }, {leaf({2, 3})});
  expect_gradcheck([index](const Inputs& x) { return index_select(x[0], 0, index); }, {transposed_leaf({3, 2})});
  const Tensor gi = tensor<int64_t>({0, 0, 1, 2, 1, 1}, {2, 3});
  expect_gradcheck([gi](const Inputs& x) { return gather(x[0], 0, gi); }, {leaf({3, 3})});
  expect_gradcheck([gi](const Inputs& x) { return gather(x[0], 1, gi); }, {leaf({2, 4})});
  expect_gradcheck([gi](const Inputs& x) { return scatter_add(x[0], 1, gi, x[1]); }, {leaf({2, 4}), leaf({2, 3})});
}

TEST_F(Formulas, Views) {
  const Tensor a = leaf({2, 3, 4});
  // The gradient is a nonlinear function of the view so that misplaced elements are caught.
  expect_gradcheck([](const Inputs& x) { return x[0].reshape({4, 6}) * x[0].reshape({4, 6}); }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0].view({-1}); }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0].flatten(1); }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0].transpose(0, 2); }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0].permute({2, 0, 1}); }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0].narrow(2, 1, 2); }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0].select(1, -1); }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0].slice(2, 0, std::nullopt, 2); }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0].unsqueeze(1).squeeze(); }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0].unsqueeze(0).squeeze(0); }, {a});
  expect_gradcheck([](const Inputs& x) { return x[0].expand({2, 2, 3}) * x[1]; }, {leaf({2, 1, 3}), leaf({2, 2, 3})});
  expect_gradcheck([](const Inputs& x) { return x[0].expand({5, -1}); }, {leaf({3})});
  // Views of non-contiguous tensors, and reshape that has to copy.
  const Tensor t = transposed_leaf({3, 4});
  expect_gradcheck([](const Inputs& x) { return x[0].reshape({12}); }, {t});
  expect_gradcheck([](const Inputs& x) { return x[0].slice(1, 1, 3).t(); }, {t});
}

TEST_F(Formulas, ViewsChainToTheLeaf) {
  Tensor a = leaf({2, 3});
  sum(a.select(0, 1) * 2.0).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 0, 0, 2, 2, 2}));
}

TEST_F(Formulas, CatAndStack) {
  expect_gradcheck([](const Inputs& x) { return cat({x[0], x[1] * x[1]}, 1); }, {leaf({2, 3}), leaf({2, 2})});
  expect_gradcheck([](const Inputs& x) { return cat({x[0], x[1]}, 0); }, {transposed_leaf({2, 3}), leaf({1, 3})});
  expect_gradcheck([](const Inputs& x) { return stack({x[0], x[1], x[0]}, 1); }, {leaf({2, 3}), leaf({2, 3})});
  // More inputs than one graph node takes (joined in groups).
  std::vector<Tensor> many;
  for (int i = 0; i < 11; ++i) many.push_back(leaf({1, 2}));
  Tensor joined = cat(many, 0);
  const Tensor weights = arange(0, 22, 1, DType::F64).reshape({11, 2});
  sum(joined * weights).backward();
  for (int i = 0; i < 11; ++i) {
    EXPECT_EQ(many[static_cast<std::size_t>(i)].grad().to_vector<double>(),
              (std::vector<double>{2.0 * i, 2.0 * i + 1}));
  }
}

TEST_F(Formulas, CopiesAndConversions) {
  expect_gradcheck([](const Inputs& x) { return x[0].clone() * x[0]; }, {leaf({2, 3})});
  expect_gradcheck([](const Inputs& x) { return x[0].contiguous() * 2.0; }, {transposed_leaf({2, 3})});
  // Through f32 and back: the gradient flows (with f32 precision).
  Tensor a = leaf({3});
  sum(a.to(DType::F32) * 3.0).backward();
  EXPECT_EQ(a.grad().dtype(), DType::F64);
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{3, 3, 3}));
  EXPECT_FALSE(a.to(DType::I64).requires_grad());  // integer results carry no gradient
}

TEST_F(Formulas, InPlaceOpsOnLeavesThatRequireGradThrow) {
  Tensor a = leaf({3});
  const Tensor b = randn({3}, DType::F64);
  EXPECT_THROW(add_(a, b), InvalidArgumentError);
  EXPECT_THROW(mul_(a, b), InvalidArgumentError);
  EXPECT_THROW(relu_(a), InvalidArgumentError);
  try {
    a += b;
    FAIL() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("a leaf tensor that requires grad"), std::string::npos) << e.what();
  }
  NoGradGuard guard;  // an optimizer step
  const std::vector<double> before = a.to_vector<double>();
  sub_(a, b, 0.5);
  EXPECT_DOUBLE_EQ(a.to_vector<double>()[0], before[0] - 0.5 * b.to_vector<double>()[0]);
}

TEST_F(Formulas, InPlaceOpsOnResultsAreRecorded) {
  Tensor a = leaf({3});
  const Tensor b = randn({3}, DType::F64);
  Tensor c = a * 2.0;
  c += b;
  c *= b;
  sum(c).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (b * 2.0).to_vector<double>());
}

TEST_F(Formulas, NoGradGuardRecordsNothing) {
  const Tensor a = leaf({2, 2});
  NoGradGuard guard;
  EXPECT_FALSE(matmul(a, a).requires_grad());
  EXPECT_FALSE(sum(exp(a)).requires_grad());
  EXPECT_FALSE(a.t().requires_grad());
}

TEST_F(Formulas, LinearRegressionBySgdConverges) {
  // y = 3x - 2, fitted by w and b with mean squared error.
  const Tensor x = linspace(-1, 1, 32, DType::F64).reshape({32, 1});
  const Tensor y = x * 3.0 - 2.0;
  Tensor w = zeros({1, 1}, DType::F64), b = zeros({1}, DType::F64);
  w.requires_grad_();
  b.requires_grad_();
  double loss_value = 0;
  for (int step = 0; step < 200; ++step) {
    const Tensor diff = addmm(b, x, w) - y;
    const Tensor loss = mean(diff * diff);
    loss_value = loss.item<double>();
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    loss.backward();
    NoGradGuard guard;
    sub_(w, w.grad(), 0.3);
    sub_(b, b.grad(), 0.3);
  }
  EXPECT_NEAR(w.item<double>(), 3.0, 1e-3);
  EXPECT_NEAR(b.item<double>(), -2.0, 1e-3);
  EXPECT_LT(loss_value, 1e-6);
}

}  // namespace
}  // namespace strata
