#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "strata/kernels/elementwise.h"

namespace strata {
namespace {

using kernels::FastDivider;

TEST(FastDivider, QuotientsEqualIntegerDivisionUpTo2To31) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> any(0, (1u << 31) - 1);
  std::vector<std::uint32_t> divisors{1, 2, 3, 5, 7, 10, 31, 32, 33, 255, 256, 257, 1000, 65535, 65536, 65537,
                                      (1u << 30) - 1, 1u << 30, (1u << 30) + 1, (1u << 31) - 1};
  for (int i = 0; i < 200; ++i) divisors.push_back(std::max<std::uint32_t>(1, any(rng) >> (i % 31)));
  for (const std::uint32_t d : divisors) {
    const FastDivider divider(d);
    std::vector<std::uint32_t> numerators{0, 1, d - 1, d, d + 1, 2 * d - 1, (1u << 31) - 1, (1u << 31) - 2};
    for (int i = 0; i < 100; ++i) numerators.push_back(any(rng));
    for (const std::uint32_t n : numerators) {
      if (n >= (1u << 31)) continue;
      ASSERT_EQ(divider.div(n), n / d) << n << " / " << d;
    }
  }
}

TensorView view_of(Shape shape, Strides strides) {
  TensorView v;
  v.shape = std::move(shape);
  v.strides = std::move(strides);
  return v;
}

// The offsets of every element, computed by hand from the shape and strides (row-major linear index).
std::vector<int64_t> offsets_by_hand(const TensorView& v) {
  std::vector<int64_t> out;
  const int64_t n = v.numel();
  for (int64_t linear = 0; linear < n; ++linear) {
    int64_t rest = linear, offset = 0;
    for (auto d = v.dim() - 1; d >= 0; --d) {
      offset += (rest % v.shape[d]) * v.strides[d];
      rest /= v.shape[d];
    }
    out.push_back(offset);
  }
  return out;
}

TEST(OffsetCalculator, NarrowIndexArithmeticGivesTheOffsetsOfEveryElement) {
  // A transposed view, a broadcast operand (stride 0) and odd sizes: nothing merges, every divider is used.
  const TensorView out = view_of({3, 5, 7}, {35, 7, 1});
  const TensorView transposed = view_of({3, 5, 7}, {1, 21, 3});
  const TensorView broadcast = view_of({3, 5, 7}, {0, 1, 0});
  const TensorView* views[3] = {&out, &transposed, &broadcast};
  const auto calc = kernels::make_offset_calculator(views);
  ASSERT_TRUE(calc.narrow);
  ASSERT_EQ(calc.ndim, 3);
  const auto expected_transposed = offsets_by_hand(transposed);
  const auto expected_broadcast = offsets_by_hand(broadcast);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t o[3];
    calc.offsets(i, o);
    ASSERT_EQ(o[0], i);
    ASSERT_EQ(o[1], expected_transposed[static_cast<std::size_t>(i)]) << "element " << i;
    ASSERT_EQ(o[2], expected_broadcast[static_cast<std::size_t>(i)]) << "element " << i;
  }
}

TEST(OffsetCalculator, ShapesOf2To31ElementsOrMoreTakeTheWideArithmetic) {
  // No memory behind the views: only the index arithmetic is exercised.
  const TensorView big = view_of({3, int64_t{1} << 30}, {1, 3});  // a transposed [2^30, 3]
  const TensorView* views[1] = {&big};
  const auto calc = kernels::make_offset_calculator(views);
  EXPECT_FALSE(calc.narrow);
  int64_t o[1];
  const int64_t last = 3 * (int64_t{1} << 30) - 1;
  calc.offsets(last, o);
  EXPECT_EQ(o[0], 2 * 1 + ((int64_t{1} << 30) - 1) * 3);

  const TensorView just_below = view_of({2, (int64_t{1} << 30) - 1}, {1, 2});
  const TensorView* narrow_views[1] = {&just_below};
  const auto narrow = kernels::make_offset_calculator(narrow_views);
  EXPECT_TRUE(narrow.narrow);
  narrow.offsets(2 * ((int64_t{1} << 30) - 1) - 1, o);
  EXPECT_EQ(o[0], 1 + ((int64_t{1} << 30) - 2) * 2);
}

TEST(OffsetCalculator, EmptyShapesBuildWithoutDividingByZero) {
  const TensorView empty = view_of({4, 0, 3}, {0, 3, 1});
  const TensorView* views[1] = {&empty};
  const auto calc = kernels::make_offset_calculator(views);
  EXPECT_FALSE(calc.narrow);
}

}  // namespace
}  // namespace strata
