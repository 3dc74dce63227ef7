// Activations in the backend's blocked layout (Note [Activations in oneDNN's blocked layout] in nn/blocked.cpp): the
// blocked pooling and convolution against their NCHW counterparts, and a fused Sequential that runs blocked against
// the same layers run one by one. CPU only: the blocked entries are registered where oneDNN is.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/blocked.h"
#include "strata/nn/functional.h"
#include "strata/nn/layers.h"
#include "strata/ops/kernel_table.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "test_checks.h"

namespace strata {
namespace {

namespace F = nn::functional;

std::vector<float> values(const Tensor& t) { return t.cpu().contiguous().to_vector<float>(); }

// NaN where the other is NaN, equal bits elsewhere.
void expect_same(const std::vector<float>& got, const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << ", element " << i;
    } else {
      EXPECT_EQ(got[i], expected[i]) << what << ", element " << i;
    }
  }
}

Tensor to_blocked(const Tensor& x, int64_t b) {
  return x.reshape({x.size(0), x.size(1) / b, b, x.size(2), x.size(3)}).permute({0, 1, 3, 4, 2}).contiguous();
}
Tensor from_blocked(const Tensor& x) {
  return x.permute({0, 1, 4, 2, 3}).reshape({x.size(0), x.size(1) * x.size(4), x.size(2), x.size(3)});
}

// Kernel lookups of `op` on the CPU while `f` runs (Note [Counting kernel calls]).
template <typename Fn>
uint64_t cpu_calls(const std::string& op, Fn f) {
  ops::reset_kernel_call_counts();
  ops::set_kernel_call_counting(true);
  f();
  ops::set_kernel_call_counting(false);
  for (const auto& row : ops::kernel_table()) {
    if (row.op == op) return row.calls[static_cast<int>(DeviceType::CPU)];
  }
  return 0;
}

class BlockedLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    block = nn::blocked::block_size(kCPU, DType::F32);
    if (block == 0) GTEST_SKIP() << "this build's CPU backend has no blocked layout (no oneDNN)";
  }
  int64_t block = 0;
};

TEST_F(BlockedLayout, IsOnlyForF32AndDevicesWithBlockedKernels) {
  EXPECT_TRUE(block == 8 || block == 16) << block;
  EXPECT_EQ(nn::blocked::block_size(kCPU, DType::F64), 0);
}

// Windows that tile the input (the 2x2 fast path), windows that leave a row and a column out, and overlapping
// windows with padding; values with ties (quarters) and NaNs, whose rules (the first maximum and the first NaN win)
// the NCHW kernel sets.
TEST_F(BlockedLayout, MaxPoolingMatchesNchwWithTiesAndNaNs) {
  struct Case {
    int64_t size;
    F::Pair kernel;
    std::optional<F::Pair> stride;
    F::Pair padding;
  };
  for (const Case& c : {Case{8, 2, std::nullopt, 0}, Case{9, 2, std::nullopt, 0}, Case{9, 3, F::Pair(2), 1}}) {
    SCOPED_TRACE("input " + std::to_string(c.size) + ", kernel " + std::to_string(c.kernel.h));
    manual_seed(11);
    const Shape shape{2, 2 * block, c.size, c.size};
    std::vector<float> data = values(randn(shape));
    for (float& v : data) v = std::floor(v * 4.0f) / 4.0f;  // ties
    for (std::size_t i = 5; i < data.size(); i += 97) data[i] = NAN;
    Tensor x = tensor(data, shape);
    x.requires_grad_();
    Tensor xb = to_blocked(x.detach(), block);
    xb.requires_grad_();

    const Tensor plain = F::max_pool2d(x, c.kernel, c.stride, c.padding);
    const Tensor pooled = nn::blocked::max_pool2d(xb, c.kernel, c.stride, c.padding, block, false);
    ASSERT_EQ(pooled.dim(), 5);
    expect_same(values(from_blocked(pooled)), values(plain), "blocked output");
    expect_same(values(nn::blocked::max_pool2d(xb, c.kernel, c.stride, c.padding, block, true)), values(plain),
                "NCHW output");

    const Tensor g = randn(plain.shape());
    plain.backward(g);
    pooled.backward(to_blocked(g, block));
    expect_same(values(from_blocked(xb.grad())), values(x.grad()), "input gradient");
  }
}

TEST_F(BlockedLayout, ConvolutionMatchesNchwFromEitherLayout) {
  manual_seed(12);
  const Tensor x = randn({3, block, 7, 7}), w = randn({2 * block, block, 3, 3}) * 0.2, b = randn({2 * block});
  const std::vector<float> expected = values(F::conv2d(x, w, b, 1, 1));
  const Tensor from_nchw = nn::blocked::conv2d(x, w, b, 1, 1, 1, 1, 0, block);
  const Tensor from_blocked_input = nn::blocked::conv2d(to_blocked(x, block), w, b, 1, 1, 1, 1, block, block);
  EXPECT_EQ(from_nchw.shape(), Shape({3, 2, 7, 7, block}));
  expect_same(values(from_blocked(from_nchw)), expected, "from an NCHW input");
  expect_same(values(from_blocked(from_blocked_input)), expected, "from a blocked input");
}

TEST_F(BlockedLayout, BadShapesAreRefusedByName) {
  using testing::expect_error;
  const Tensor x = randn({1, block, 4, 4});
  expect_error<ShapeError>([&] { nn::blocked::max_pool2d(x, 2, std::nullopt, 0, block, false); },
                           {"max_pool2d", "blocked activation"});
  const Tensor twelve = randn({block + 4, block, 3, 3});
  expect_error<ShapeError>([&] { nn::blocked::conv2d(x, twelve, Tensor(), 1, 1, 1, 1, 0, block); },
                           {"conv2d", "do not fill blocks"});
  const Tensor odd = randn({1, 2, 4, 4, block + 1}), w = randn({block, 2 * block, 3, 3});
  expect_error<ShapeError>([&] { nn::blocked::conv2d(odd, w, Tensor(), 1, 1, 1, 1, block, block); },
                           {"conv2d", "blocked activation"});
}

// The reference network's shape of layers, with channels that fill blocks of 8 and of 16: the fused Sequential runs
// its two triples blocked and gives the layer-by-layer values and gradients (the first layer's weight gradient to
// rounding: its product reads grad_output a block at a time).
TEST_F(BlockedLayout, AFusedSequentialRunsBlockedWithTheSameResults) {
  manual_seed(13);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                     nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                     nn::Linear(32 * 4 * 4, 5));
  const Tensor x = randn({4, 1, 16, 16});
  const auto run = [&] {
    net.zero_grad();
    const Tensor out = net(x);
    sum(out * out).backward();
    std::vector<std::vector<float>> result{values(out)};
    for (const Tensor& p : net.parameters()) result.push_back(values(p.grad()));
    return result;
  };
  const auto separate = run();
  net.fuse();
  std::vector<std::vector<float>> fused;
  EXPECT_EQ(cpu_calls("conv2d_blocked", [&] { fused = run(); }), 2u) << "both convolutions ran blocked";
  ASSERT_EQ(fused.size(), separate.size());
  expect_same(fused[0], separate[0], "output");
  for (std::size_t i = 1; i < fused.size(); ++i) {
    SCOPED_TRACE("gradient " + std::to_string(i - 1));
    ASSERT_EQ(fused[i].size(), separate[i].size());
    for (std::size_t j = 0; j < fused[i].size(); ++j) EXPECT_NEAR(fused[i][j], separate[i][j], 1e-4) << j;
  }
}

// A 5-D tensor given to a fused Sequential is a mistake, not a blocked activation: the convolution's own error.
TEST_F(BlockedLayout, AFiveDimensionalInputToAFusedSequentialIsRefused) {
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(block, block, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2));
  net.fuse();
  testing::expect_error<ShapeError>([&] { net(randn({1, 1, 4, 4, block})); }, {"conv2d", "expected a 4-D input"});
}

TEST_F(BlockedLayout, ChannelsThatDoNotFillBlocksStayNchw) {
  manual_seed(14);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(1, block + 4, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2));
  const Tensor x = randn({2, 1, 8, 8});
  const std::vector<float> separate = values(net(x));
  net.fuse();
  std::vector<float> fused;
  EXPECT_EQ(cpu_calls("conv2d_blocked", [&] { fused = values(net(x)); }), 0u);
  expect_same(fused, separate, "output");
}

}  // namespace
}  // namespace strata
