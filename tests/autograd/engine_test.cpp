// The backward engine, exercised through detail::record with hand-written derivatives, so that these tests do not
// depend on any op's formula.
#include <gtest/gtest.h>

#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/grad_hook.h"

namespace strata {
namespace {

// y = k * x, elementwise on the host (CPU f64 tensors), recorded with its derivative.
Tensor scale(const Tensor& x, double k) {
  Tensor y = empty(x.shape(), DType::F64);
  const Tensor xc = x.contiguous();
  for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = k * xc.data<double>()[i];
  if (detail::needs_grad({&x})) {
    detail::record("scale", {&x}, y, [k](const Tensor& g) { return std::vector<Tensor>{scale(g, k)}; });
  }
  return y;
}

// z = x + y (same shapes).
Tensor plus(const Tensor& x, const Tensor& y) {
  Tensor z = empty(x.shape(), DType::F64);
  for (int64_t i = 0; i < x.numel(); ++i) z.data<double>()[i] = x.data<double>()[i] + y.data<double>()[i];
  if (detail::needs_grad({&x, &y})) {
    detail::record("plus", {&x, &y}, z, [](const Tensor& g) { return std::vector<Tensor>{g, g}; });
  }
  return z;
}

Tensor leaf(std::vector<double> values) {
  Tensor t = tensor<double>(values);
  t.requires_grad_();
  return t;
}

TEST(Engine, ChainRuleThroughTwoNodes) {
  Tensor x = leaf({1, 2});
  const Tensor y = scale(scale(x, 3), 2);
  EXPECT_EQ(y.grad_fn_name(), "scale");
  EXPECT_FALSE(y.is_leaf());
  y.backward(tensor<double>({1, 10}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 60}));
}

TEST(Engine, GradientsFromTwoPathsAreSummed) {
  Tensor x = leaf({1});
  const Tensor a = scale(x, 2), b = scale(x, 5);
  plus(a, b).backward();
  EXPECT_EQ(x.grad().item<double>(), 7.0);
}

TEST(Engine, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({1});
  scale(x, 2).backward();
  scale(x, 3).backward();
  EXPECT_EQ(x.grad().item<double>(), 5.0);
}

TEST(Engine, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({1});
  const Tensor y = scale(x, 2);
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().item<double>(), 4.0);
  try {
    y.backward();
    FAIL() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Engine, NoGradGuardStopsRecording) {
  Tensor x = leaf({1});
  {
    NoGradGuard guard;
    EXPECT_FALSE(scale(x, 2).requires_grad());
  }
  EXPECT_TRUE(scale(x, 2).requires_grad());
}

TEST(Engine, HooksSeeAndMayReplaceGradients) {
  Tensor x = leaf({1});
  Tensor y = scale(x, 2);
  double seen = 0;
  y.register_hook([&](const Tensor& g) {
    seen = g.item<double>();
    return scale(g, 10);
  });
  x.register_hook([](const Tensor& g) { return scale(g, 0.5); });
  scale(y, 3).backward();
  EXPECT_EQ(seen, 3.0);
  EXPECT_EQ(x.grad().item<double>(), 30.0);  // 3 * 10 * 2 * 0.5
}

TEST(Engine, AGradientOnlyTheEngineHoldsBecomesTheLeafsGradWithoutACopy) {
  Tensor x = leaf({1, 2});
  const void* computed = nullptr;
  x.register_hook([&](const Tensor& g) {
    computed = g.data_ptr();
    return Tensor();  // keeps nothing
  });
  scale(x, 2).backward(tensor<double>({1, 1}));
  EXPECT_EQ(x.grad().data_ptr(), computed);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2}));
}

TEST(Engine, AGradientSomeoneElseHoldsIsCopiedBeforeAccumulatingIntoIt) {
  // The root's gradient, given by the user, reaches the leaf unchanged through plus: the user still holds it.
  Tensor x = leaf({1, 2}), y = leaf({0, 0});
  const Tensor root_grad = tensor<double>({1, 1});
  plus(x, y).backward(root_grad);
  EXPECT_FALSE(x.grad().shares_storage(root_grad));
  EXPECT_FALSE(y.grad().shares_storage(root_grad));
  EXPECT_FALSE(x.grad().shares_storage(y.grad()));
  plus(x, y).backward(root_grad);  // accumulates in place into the leaves' own gradients
  EXPECT_EQ(root_grad.to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2}));
  // A hook that keeps the gradient it sees holds it too.
  Tensor z = leaf({3});
  std::vector<Tensor> kept;
  z.register_hook([&](const Tensor& g) {
    kept.push_back(g);
    return Tensor();
  });
  scale(z, 2).backward();
  EXPECT_FALSE(z.grad().shares_storage(kept[0]));
  scale(z, 2).backward();
  EXPECT_EQ(kept[0].item<double>(), 2.0);
  EXPECT_EQ(z.grad().item<double>(), 4.0);
}

TEST(Engine, DetachCutsTheGraphButSharesData) {
  Tensor x = leaf({1, 2});
  const Tensor d = scale(x, 2).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
}

TEST(Engine, CopiesOfAHandleShareGradients) {
  Tensor x = leaf({1});
  const Tensor alias = x;
  scale(x, 4).backward();
  EXPECT_EQ(alias.grad().item<double>(), 4.0);
}

TEST(Engine, ClearErrors) {
  EXPECT_THROW(tensor<int64_t>({1}).requires_grad_(), DTypeError);
  EXPECT_THROW(tensor<double>({1}).backward(), InvalidArgumentError);  // nothing requires grad
  Tensor x = leaf({1, 2});
  EXPECT_THROW(scale(x, 2).backward(), ShapeError);  // not a scalar: gradient needed
  EXPECT_THROW(scale(x, 2).requires_grad_(false), InvalidArgumentError);
}

TEST(Engine, GradientsMustMatchTheirTensor) {
  Tensor x = ones({2});
  x.requires_grad_();
  EXPECT_THROW(x.set_grad(ones({1})), InvalidArgumentError);
  EXPECT_THROW(x.set_grad(ones({2}, DType::I64)), InvalidArgumentError);
  x.set_grad(ones({2}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 1}));
  const Tensor y = scale(leaf({1, 2}), 2);
  EXPECT_THROW(y.backward(tensor<int64_t>({1, 2})), DTypeError);
  // A hook may change a gradient's values, not its shape.
  Tensor z = leaf({1, 2, 3});
  z.register_hook([](const Tensor&) { return zeros({7}, DType::F64); });
  EXPECT_THROW(scale(z, 2).backward(ones({3}, DType::F64)), InvalidArgumentError);
}

}  // namespace
}  // namespace strata
