// In-place ops under autograd (Note [In-place ops and autograd]), version counters (Note [Version counters]), graphs
// too deep to free by recursion (Note [Freeing deep graphs]) and threads that share a leaf.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata {
namespace {

Tensor leaf(std::vector<float> values) {
  Tensor t = tensor<float>(values);
  t.requires_grad_();
  return t;
}

TEST(InPlace, EveryWriteBumpsTheVersionOfEveryView) {
  Tensor t = zeros({4});
  Tensor view = t.narrow(0, 1, 2);
  const uint64_t before = t.version();
  view.fill_(1);
  add_(t, ones({4}));
  t.copy_(zeros({4}));
  EXPECT_EQ(t.version(), before + 3);
  EXPECT_EQ(view.version(), t.version());
}

TEST(InPlace, OnALeafThatRequiresGradThrowsWithGradModeOn) {
  Tensor w = leaf({1, 2});
  EXPECT_THROW(add_(w, ones({2})), InvalidArgumentError);
  EXPECT_THROW(w.fill_(0), InvalidArgumentError);
  EXPECT_THROW(w.copy_(zeros({2})), InvalidArgumentError);
  NoGradGuard no_grad;
  add_(w, ones({2}));  // as an optimizer step
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{2, 3}));
}

TEST(InPlace, OnANonLeafIsRecorded) {
  Tensor w = leaf({1, 2});
  Tensor a = w * 2.0;
  mul_(a, full({2}, 3.0F));
  relu_(a);
  sum(a).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{6, 6}));
}

TEST(InPlace, AnOperandThatRequiresGradMakesTheTargetRequireGrad) {
  Tensor w = leaf({1, 2});
  Tensor h = zeros({2});
  add_(h, w * 5.0);
  EXPECT_TRUE(h.requires_grad());
  EXPECT_FALSE(h.is_leaf());
  sum(h).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{5, 5}));
}

TEST(InPlace, WritingAValueABackwardNeedsRefusesTheBackward) {
  Tensor v = leaf({1, 2});
  Tensor a = v * 2.0;
  const Tensor b = sum(a * a);
  a.fill_(100);
  EXPECT_THROW(b.backward(), InvalidArgumentError);
}

TEST(InPlace, AStepBetweenForwardAndBackwardRefusesTheBackward) {
  Tensor p = leaf({1, 2});
  const Tensor loss = sum(p * tensor<float>({3, 4}));
  {
    NoGradGuard no_grad;
    mul_(p, full({2}, 10.0F));
  }
  EXPECT_THROW(loss.backward(), InvalidArgumentError);
}

TEST(InPlace, WritingAValueNoDerivativeReadsIsAllowed) {
  // add saves no values, so changing its input afterwards is harmless (as in PyTorch).
  Tensor w = leaf({1, 2});
  Tensor a = w * 2.0;
  const Tensor b = sum(a + 1.0);
  add_(a, ones({2}));
  b.backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 2}));
}

TEST(InPlace, AnOutputTheDerivativeReadsIsCheckedToo) {
  Tensor w = leaf({1, 2});
  Tensor e = exp(w);  // exp's derivative reads its output
  const Tensor loss = sum(e);
  add_(e, ones({2}));
  EXPECT_THROW(loss.backward(), InvalidArgumentError);
}

TEST(InPlace, RecordedWriteIntoAViewIsRefused) {
  Tensor w = leaf({1, 2});
  const Tensor a = w * 2.0;
  Tensor row = a.narrow(0, 0, 1);
  EXPECT_THROW(mul_(row, full({1}, 3.0F)), InvalidArgumentError);
  Tensor whole = a.view({2});  // all of a's memory, but a still sees it
  EXPECT_THROW(mul_(whole, full({2}, 3.0F)), InvalidArgumentError);
}

TEST(AssignView, RecordsTheGradientOfTheAssignedValue) {
  Tensor w = leaf({1, 2});
  Tensor h = zeros({2});
  assign_view(h, h.select(0, 0), sum(w * 3.0));
  EXPECT_TRUE(h.requires_grad());
  sum(h * tensor<float>({2, 7})).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{6, 6}));
}

TEST(AssignView, OverwrittenValuesGetNoGradient) {
  Tensor w = leaf({1, 2, 3});
  Tensor a = w * 2.0;
  assign_view(a, a.narrow(0, 1, 1), full({1}, 9.0F));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 9, 6}));
  sum(a).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 0, 2}));
}

TEST(AssignView, IntoTheResultOfAViewOpNobodyElseSeesIsRecorded) {
  Tensor w = leaf({1, 2, 3});
  Tensor a = (w * 2.0).reshape({3});  // a view op's result, but the product it viewed is gone
  assign_view(a, a.narrow(0, 0, 1), full({1}, 7.0F));
  sum(a).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{0, 2, 2}));
}

TEST(AssignView, IntoANonContiguousTensorThatRequiresGradIsRefused) {
  Tensor w = leaf({1, 2, 3, 4});
  Tensor t = (w * 2.0).reshape({2, 2}).t();
  EXPECT_THROW(assign_view(t, t.select(0, 0), zeros({2})), InvalidArgumentError);
}

TEST(AssignView, IntoALeafThatRequiresGradThrows) {
  Tensor w = leaf({1, 2});
  EXPECT_THROW(assign_view(w, w.select(0, 0), scalar_tensor(5.0)), InvalidArgumentError);
}

TEST(DeepGraph, IsFreedAndWalkedWithoutRecursion) {
  // 300 000 nested destructors or frames would overflow an 8 MiB stack many times over.
  Tensor w = leaf({1});
  Tensor t = w;
  for (int i = 0; i < 300000; ++i) t = t * 1.0;
  sum(t).backward();
  EXPECT_EQ(w.grad().item<float>(), 1.0F);
  Tensor total = zeros({1});
  for (int i = 0; i < 300000; ++i) total = total + w * 2.0;
  t = Tensor();
  total = Tensor();  // never walked: freed with its whole graph
  SUCCEED();
}

TEST(DeepGraph, ALeafNobodyHoldsIsSkipped) {
  Tensor loss = sum(leaf({1, 2}) * 2.0);  // the leaf dies with this statement; its accumulator lives on in the graph
  loss.backward();
  SUCCEED();
}

TEST(SharedLeaf, ThreadsRunningBackwardSumTheirGradients) {
  Tensor w = leaf({1, 2, 3, 4});
  constexpr int kThreads = 4, kSteps = 200;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&w] {
      for (int s = 0; s < kSteps; ++s) sum(w * 2.0).backward();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(4, 2.0F * kThreads * kSteps));
}

TEST(SharedLeaf, ClearingTheGradientWhileOthersAccumulateIsSafe) {
  Tensor w = leaf({1, 2});
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&w, i] {
      for (int s = 0; s < 300; ++s) {
        if (i % 2 == 0) w.set_grad(Tensor());
        sum(w * 2.0).backward();
        const Tensor g = w.grad();
        if (g.defined()) EXPECT_EQ(g.numel(), 2);
      }
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace strata
