// The GPU side of the strided elementwise loops (Note [Elementwise loops]), run on the host: operator()(t) is what
// each GPU thread runs, so calling it for every thread index checks which elements the threads cover and how.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "strata/backends/portable/elementwise_ops.h"

namespace strata {
namespace {

using portable::BinaryStridedLoop;
using portable::UnaryStridedLoop;

TensorView view_of(float* data, Shape shape, Strides strides) {
  TensorView v;
  v.data = data;
  v.shape = std::move(shape);
  v.strides = std::move(strides);
  return v;
}

// Runs the loop as a GPU launch would: one call per thread, kPerThread elements each.
template <typename Loop>
void run_every_thread(const Loop& loop, int64_t n) {
  for (int64_t t = 0; t < (n + Loop::kPerThread - 1) / Loop::kPerThread; ++t) loop(t);
}

template <typename Op>
BinaryStridedLoop<float, float, Op> binary_loop(const TensorView& out, const TensorView& a, const TensorView& b) {
  const TensorView* views[3] = {&out, &a, &b};
  const auto calc = kernels::make_offset_calculator(views);
  float* o = out.ptr<float>();
  const float *x = a.ptr<float>(), *y = b.ptr<float>();
  return {o, x, y, calc, Op{}, out.numel(), portable::rows_packable(calc, o, x, y)};
}

TEST(StridedElementwiseLoop, BiasRowsTakeWholeAlignedPacksOfOneRow) {
  alignas(16) float x[3 * 8], bias[8], out[3 * 8];
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i);
  for (int j = 0; j < 8; ++j) bias[j] = 100.0f * static_cast<float>(j);
  const TensorView o = view_of(out, {3, 8}, {8, 1}), a = view_of(x, {3, 8}, {8, 1}), b = view_of(bias, {3, 8}, {0, 1});
  const auto loop = binary_loop<portable::AddOp<float>>(o, a, b);
  ASSERT_TRUE(loop.packed_rows);
  for (float& v : out) v = -1.0f;
  run_every_thread(loop, 24);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(out[i * 8 + j], x[i * 8 + j] + bias[j]) << i << ", " << j;
}

TEST(StridedElementwiseLoop, RowsThatCannotBePackedTakeEveryElementOnce) {
  // Rows of 7 (not a multiple of kPack), a transposed operand, and a count that leaves the last thread short.
  alignas(16) float x[5 * 7], y[7 * 5], out[5 * 7];
  for (int i = 0; i < 35; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1000.0f * static_cast<float>(i);
  }
  const TensorView o = view_of(out, {5, 7}, {7, 1}), a = view_of(x, {5, 7}, {7, 1}), b = view_of(y, {5, 7}, {1, 5});
  const auto loop = binary_loop<portable::AddOp<float>>(o, a, b);
  ASSERT_FALSE(loop.packed_rows);
  for (float& v : out) v = -1.0f;
  run_every_thread(loop, 35);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) EXPECT_EQ(out[i * 7 + j], x[i * 7 + j] + y[j * 5 + i]) << i << ", " << j;
}

TEST(StridedElementwiseLoop, MisalignedOrStridedRowsAreNotPacked) {
  alignas(16) float x[4 * 9], out[4 * 8];
  const TensorView o = view_of(out, {4, 8}, {8, 1});
  const TensorView shifted = view_of(x + 1, {4, 8}, {9, 1});  // rows of 8 at offsets 1, 10, 19, 28
  const TensorView* views[2] = {&o, &shifted};
  const auto calc = kernels::make_offset_calculator(views);
  EXPECT_FALSE(portable::rows_packable(calc, out, x + 1));
  const TensorView every_other = view_of(x, {4, 4}, {9, 2});
  const TensorView o4 = view_of(out, {4, 4}, {4, 1});
  const TensorView* strided[2] = {&o4, &every_other};
  EXPECT_FALSE(portable::rows_packable(kernels::make_offset_calculator(strided), out, x));

  // The unary loop over the misaligned rows still writes every element once.
  for (int i = 0; i < 36; ++i) x[i] = static_cast<float>(i);
  for (float& v : out) v = -1.0f;
  const UnaryStridedLoop<float, float, portable::NegOp<float>> loop{out, x + 1, calc, {}, 32, false};
  run_every_thread(loop, 32);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(out[i * 8 + j], -x[1 + i * 9 + j]) << i << ", " << j;
}

}  // namespace
}  // namespace strata
