#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

// The message of the exception that `f` throws as E, or a failure when it throws nothing.
template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

class Views : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  // 0, 1, ..., n-1 as f32 with `shape`, built without arange so that views are tested on their own.
  Tensor iota(const Shape& shape) const {
    std::vector<float> values(static_cast<std::size_t>(numel(shape)));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    return tensor(values, shape, device());
  }
};

TEST_P(Views, ViewSharesStorageAndWritesShowInTheBase) {
  const Tensor base = iota({2, 3});
  Tensor v = base.view({3, 2});
  EXPECT_TRUE(v.shares_storage(base));
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_EQ(v.strides(), (Strides{2, 1}));
  v.select(0, 1).fill_(-1);  // elements 2 and 3 of the base
  EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{0, 1, -1, -1, 4, 5}));
}

TEST_P(Views, ViewInfersOneMinusOne) {
  const Tensor base = iota({2, 3, 4});
  EXPECT_EQ(base.view({-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_EQ(base.view({4, -1}).shape(), (Shape{4, 6}));
  EXPECT_EQ(base.view({-1}).shape(), (Shape{24}));
  EXPECT_EQ(base.view({1, -1, 1}).strides(), (Strides{24, 1, 1}));
}

TEST_P(Views, ViewRejectsBadShapesNamingThem) {
  const Tensor base = iota({2, 3});
  const std::string wrong = error_of<ShapeError>([&] { base.view({4, 2}); });
  EXPECT_CONTAINS(wrong, "[4, 2]");
  EXPECT_CONTAINS(wrong, "6 elements");
  EXPECT_CONTAINS(error_of<ShapeError>([&] { base.view({-1, -1}); }), "only one dimension can be -1");
  EXPECT_CONTAINS(error_of<ShapeError>([&] { base.view({4, -1}); }), "[4, -1]");
  EXPECT_CONTAINS(error_of<ShapeError>([&] { base.view({-2, 3}); }), "-2");
}

TEST_P(Views, ViewOfIncompatibleStridesIsAnErrorThatSuggestsReshape) {
  const Tensor transposed = iota({2, 3}).t();
  const std::string message = error_of<ShapeError>([&] { transposed.view({6}); });
  EXPECT_CONTAINS(message, "view");
  EXPECT_CONTAINS(message, "[6]");
  EXPECT_CONTAINS(message, "[3, 2]");  // the input's shape
  EXPECT_CONTAINS(message, "[1, 3]");  // and strides
  EXPECT_CONTAINS(message, "reshape");
}

TEST_P(Views, ViewSplitsAndMergesContiguousChunksOfANonContiguousTensor) {
  const Tensor base = iota({4, 6});
  const Tensor cols = base.narrow(1, 0, 3);  // shape [4, 3], strides [6, 1]
  const Tensor split = cols.view({2, 2, 3});
  EXPECT_EQ(split.strides(), (Strides{12, 6, 1}));
  EXPECT_TRUE(split.shares_storage(base));
  EXPECT_EQ(split.to_vector<float>(), cols.to_vector<float>());
  EXPECT_THROW(cols.view({12}), ShapeError);  // rows are not adjacent in memory
  // Size-1 dimensions can go anywhere.
  EXPECT_EQ(cols.view({4, 1, 3}).strides(), (Strides{6, 3, 1}));
}

TEST_P(Views, ReshapeIsAViewWhenPossibleAndACopyOtherwise) {
  const Tensor base = iota({2, 3});
  const Tensor same = base.reshape({3, -1});
  EXPECT_TRUE(same.shares_storage(base));
  EXPECT_EQ(same.shape(), (Shape{3, 2}));
  const Tensor copied = base.t().reshape({6});
  EXPECT_FALSE(copied.shares_storage(base));
  EXPECT_EQ(copied.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_THROW(base.reshape({5}), ShapeError);
}

TEST_P(Views, FlattenMergesARangeOfDimensions) {
  const Tensor base = iota({2, 3, 4});
  EXPECT_EQ(base.flatten().shape(), (Shape{24}));
  EXPECT_EQ(base.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(base.flatten(0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(base.flatten(-2, -1).shape(), (Shape{2, 12}));
  EXPECT_TRUE(base.flatten().shares_storage(base));
  EXPECT_EQ(scalar_tensor(3.0f, device()).flatten().shape(), (Shape{1}));
  EXPECT_THROW(base.flatten(2, 1), IndexError);
  // A non-contiguous input is copied.
  const Tensor t = iota({2, 3}).t();
  EXPECT_EQ(t.flatten().to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST_P(Views, TransposeSwapsShapeAndStrides) {
  const Tensor base = iota({2, 3, 4});
  const Tensor t = base.transpose(0, 2);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Strides{1, 4, 12}));
  EXPECT_TRUE(t.shares_storage(base));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(iota({2, 3}).t().to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(base.transpose(-1, 1).shape(), (Shape{2, 4, 3}));
  EXPECT_THROW(base.transpose(0, 3), IndexError);
}

TEST_P(Views, PermuteReordersDimensions) {
  const Tensor base = iota({2, 3, 4});
  const Tensor p = base.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Strides{1, 12, 4}));
  EXPECT_EQ(p.select(0, 1).to_vector<float>(), (std::vector<float>{1, 5, 9, 13, 17, 21}));
  EXPECT_EQ(base.permute({-1, 0, 1}).shape(), (Shape{4, 2, 3}));
  EXPECT_CONTAINS(error_of<InvalidArgumentError>([&] { base.permute({0, 0, 1}); }), "appears twice");
  EXPECT_CONTAINS(error_of<ShapeError>([&] { base.permute({0, 1}); }), "[2, 3, 4]");
}

TEST_P(Views, NarrowAndSelectMoveTheOffset) {
  const Tensor base = iota({4, 5});
  const Tensor n = base.narrow(1, 1, 3);
  EXPECT_EQ(n.shape(), (Shape{4, 3}));
  EXPECT_EQ(n.strides(), (Strides{5, 1}));
  EXPECT_EQ(n.offset(), 1);
  EXPECT_EQ(base.narrow(0, -2, 2).offset(), 10);
  const Tensor row = base.select(0, 2);
  EXPECT_EQ(row.shape(), (Shape{5}));
  EXPECT_EQ(row.offset(), 10);
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{10, 11, 12, 13, 14}));
  const Tensor col = base.select(1, -1);
  EXPECT_EQ(col.strides(), (Strides{5}));
  EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{4, 9, 14, 19}));
  EXPECT_EQ(base[3].to_vector<float>(), base.select(0, 3).to_vector<float>());
  EXPECT_EQ(base[1][2].item<float>(), 7.0f);
  EXPECT_EQ(base[1][2].dim(), 0);
}

TEST_P(Views, NarrowAndSelectOutOfRangeAreIndexErrors) {
  const Tensor base = iota({4, 5});
  EXPECT_CONTAINS(error_of<IndexError>([&] { base.narrow(1, 3, 3); }), "size 5");
  EXPECT_CONTAINS(error_of<IndexError>([&] { base.select(0, 4); }), "index 4");
  EXPECT_THROW(base.select(0, -5), IndexError);
  EXPECT_THROW(base.select(2, 0), IndexError);
  EXPECT_THROW(scalar_tensor(1.0f, device()).select(0, 0), IndexError);
}

TEST_P(Views, SliceFollowsPythonRules) {
  const Tensor v = iota({10});
  const Tensor s = v.slice(0, 1, 8, 3);
  EXPECT_EQ(s.shape(), (Shape{3}));
  EXPECT_EQ(s.strides(), (Strides{3}));
  EXPECT_EQ(s.offset(), 1);
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 4, 7}));
  EXPECT_EQ(v.slice(0, -3, std::nullopt).to_vector<float>(), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(v.slice(0, std::nullopt, std::nullopt, 4).to_vector<float>(), (std::vector<float>{0, 4, 8}));
  EXPECT_EQ(v.slice(0, 8, 100).to_vector<float>(), (std::vector<float>{8, 9}));  // end is clamped
  EXPECT_EQ(v.slice(0, -100, 2).to_vector<float>(), (std::vector<float>{0, 1}));
  EXPECT_EQ(v.slice(0, 6, 2).numel(), 0);
  EXPECT_CONTAINS(error_of<InvalidArgumentError>([&] { v.slice(0, 0, 5, 0); }), "step");
  // Along an inner dimension of a matrix.
  const Tensor m = iota({3, 4}).slice(1, 1, std::nullopt, 2);
  EXPECT_EQ(m.shape(), (Shape{3, 2}));
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
}

TEST_P(Views, SqueezeAndUnsqueeze) {
  const Tensor base = iota({1, 3, 1});
  EXPECT_EQ(base.squeeze().shape(), (Shape{3}));
  EXPECT_EQ(base.squeeze(0).shape(), (Shape{3, 1}));
  EXPECT_EQ(base.squeeze(-1).shape(), (Shape{1, 3}));
  EXPECT_EQ(base.squeeze(1).shape(), (Shape{1, 3, 1}));  // not size 1: unchanged, as in PyTorch
  EXPECT_TRUE(base.squeeze().shares_storage(base));
  const Tensor m = iota({2, 3});
  EXPECT_EQ(m.unsqueeze(0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(m.unsqueeze(1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(m.unsqueeze(1).strides(), (Strides{3, 3, 1}));
  EXPECT_EQ(m.unsqueeze(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(m.unsqueeze(-1).strides(), (Strides{3, 1, 1}));
  EXPECT_EQ(m.unsqueeze(1).squeeze(1).to_vector<float>(), m.to_vector<float>());
  EXPECT_CONTAINS(error_of<IndexError>([&] { m.unsqueeze(3); }), "-3 to 2");
  EXPECT_THROW(m.unsqueeze(-4), IndexError);
  EXPECT_EQ(scalar_tensor(2.0f, device()).unsqueeze(0).shape(), (Shape{1}));
}

TEST_P(Views, ExpandBroadcastsWithZeroStrides) {
  const Tensor column = iota({3, 1});
  const Tensor e = column.expand({2, 3, 4});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides()[0], 0);
  EXPECT_EQ(e.strides()[1], 1);
  EXPECT_EQ(e.strides()[2], 0);
  EXPECT_TRUE(e.shares_storage(column));
  const std::vector<float> values = e.to_vector<float>();
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(values[i], static_cast<float>((i / 4) % 3)) << i;
  EXPECT_EQ(column.expand({-1, 5}).shape(), (Shape{3, 5}));
  EXPECT_EQ(column.expand_as(zeros({3, 2}, device())).shape(), (Shape{3, 2}));
  // Writing to the base shows in every expanded position.
  Tensor first = column.narrow(0, 0, 1);
  first.fill_(9);
  EXPECT_EQ(e.select(0, 1).select(0, 0).to_vector<float>(), (std::vector<float>{9, 9, 9, 9}));
}

TEST_P(Views, ExpandErrorsNameTheShapes) {
  const Tensor column = iota({3, 1});
  const std::string message = error_of<ShapeError>([&] { column.expand({4, 2}); });
  EXPECT_CONTAINS(message, "[3, 1]");
  EXPECT_CONTAINS(message, "[4, 2]");
  EXPECT_THROW(column.expand({1}), ShapeError);
  EXPECT_THROW(column.expand({-1, 3, 2}), ShapeError);  // -1 for a new leading dimension
}

TEST_P(Views, WritesThroughChainedViewsReachTheBase) {
  const Tensor base = zeros({3, 4}, device());
  base.t().slice(0, 1, std::nullopt, 2).narrow(1, 2, 1).fill_(5);  // rows 1 and 3 of the transpose, column 2
  EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 5}));
}

TEST_P(Views, CatJoinsAlongADimension) {
  const Tensor a = iota({2, 3});
  const Tensor b = full({1, 3}, 7.0f, device());
  const Tensor rows = cat({a, b});
  EXPECT_EQ(rows.shape(), (Shape{3, 3}));
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 7, 7, 7}));
  const Tensor cols = cat({a, full({2, 1}, 7.0f, device()), a.narrow(1, 0, 1)}, -1);
  EXPECT_EQ(cols.shape(), (Shape{2, 5}));
  EXPECT_EQ(cols.to_vector<float>(), (std::vector<float>{0, 1, 2, 7, 0, 3, 4, 5, 7, 3}));
  EXPECT_FALSE(rows.shares_storage(a));
  EXPECT_EQ(rows.device(), device());
}

TEST_P(Views, CatTakesNonContiguousAndEmptyInputs) {
  const Tensor t = iota({2, 3}).t();  // [[0, 3], [1, 4], [2, 5]]
  EXPECT_EQ(cat({t, t.narrow(0, 0, 0), t.narrow(0, 2, 1)}).to_vector<float>(),
            (std::vector<float>{0, 3, 1, 4, 2, 5, 2, 5}));
  // 1-D empty tensors are skipped whatever their shape, as in PyTorch.
  EXPECT_EQ(cat({zeros({0}, device()), t}).shape(), (Shape{3, 2}));
  EXPECT_EQ(cat({zeros({0}, device())}).shape(), (Shape{0}));
}

TEST_P(Views, CatPromotesDtypes) {
  const Tensor ints = tensor<int32_t>({1, 2}, {}, device());
  const Tensor floats = tensor<float>({0.5f}, {}, device());
  const Tensor out = cat({ints, floats});
  EXPECT_EQ(out.dtype(), DType::F32);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 2, 0.5f}));
  EXPECT_EQ(cat({ints, tensor<int64_t>({3}, {}, device())}).dtype(), DType::I64);
}

TEST_P(Views, CatErrorsNameTheTensorsAndTheirShapes) {
  const Tensor a = iota({2, 3});
  const std::string sizes = error_of<ShapeError>([&] { cat({a, a, iota({2, 4})}); });
  EXPECT_CONTAINS(sizes, "dimension 0");
  EXPECT_CONTAINS(sizes, "tensors[0] has shape [2, 3]");
  EXPECT_CONTAINS(sizes, "tensors[2] has shape [2, 4]");
  const std::string rank = error_of<ShapeError>([&] { cat({a, iota({6})}, 1); });
  EXPECT_CONTAINS(rank, "tensors[1] has shape [6]");
  EXPECT_CONTAINS(error_of<InvalidArgumentError>([&] { cat({}); }), "non-empty");
  EXPECT_THROW(cat({a, a}, 2), IndexError);
}

TEST_P(Views, StackAddsADimension) {
  const Tensor a = iota({2, 3});
  const Tensor b = full({2, 3}, -1.0f, device());
  EXPECT_EQ(stack({a, b}).shape(), (Shape{2, 2, 3}));
  const Tensor last = stack({a, b}, -1);
  EXPECT_EQ(last.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(last.to_vector<float>(), (std::vector<float>{0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5, -1}));
  EXPECT_EQ(stack({a, b}, 1).select(1, 1).to_vector<float>(), b.to_vector<float>());
  const std::string message = error_of<ShapeError>([&] { stack({a, iota({3, 2})}); });
  EXPECT_CONTAINS(message, "tensors[1] has shape [3, 2]");
  EXPECT_THROW(stack({a}, 3), IndexError);
}

INSTANTIATE_TEST_SUITE_P(Devices, Views, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

// A tensor that claims to live on cuda:0 without any memory: enough to test argument checks on any machine.
Tensor fake_gpu_tensor(const Shape& shape) {
  auto storage = std::make_shared<Storage>();
  storage->device = Device(DeviceType::CUDA, 0);
  return Tensor(storage, DType::F32, shape, contiguous_strides(shape), 0);
}

TEST(ViewsDevices, CatOfTensorsOnDifferentDevicesNamesThePositionsAndDevices) {
  const Tensor cpu = zeros({2, 3});
  const std::string message = error_of<DeviceMismatchError>([&] { cat({cpu, cpu, fake_gpu_tensor({2, 3})}); });
  EXPECT_CONTAINS(message, "cat");
  EXPECT_CONTAINS(message, "tensors[0] is on cpu");
  EXPECT_CONTAINS(message, "tensors[2] is on cuda:0");
  EXPECT_THROW(stack({fake_gpu_tensor({2}), zeros({2})}), DeviceMismatchError);
}

TEST(ViewsDevices, ViewsKeepTheDevice) {
  const Tensor gpu = fake_gpu_tensor({2, 3});
  EXPECT_EQ(gpu.t().device(), Device("cuda:0"));
  EXPECT_EQ(gpu.view({3, 2}).device(), Device("cuda:0"));
  EXPECT_EQ(gpu.expand({4, 2, 3}).device(), Device("cuda:0"));
}

TEST(BroadcastShapes, FollowsNumpyRulesAndNamesTheOp) {
  EXPECT_EQ(broadcast_shapes({3, 1}, {1, 4}), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes({5, 1, 2}, {4, 1}), (Shape{5, 4, 2}));
  EXPECT_EQ(broadcast_shapes({}, {2}), (Shape{2}));
  const std::string message = error_of<ShapeError>([] { broadcast_shapes({3}, {4}, "my_op"); });
  EXPECT_CONTAINS(message, "my_op");
  EXPECT_CONTAINS(message, "[3]");
  EXPECT_CONTAINS(message, "[4]");
}

// Sizes near the ends of int64: each must be a typed error, where the arithmetic used to overflow.
TEST(ViewsAtInt64Limits, SizesThatWouldOverflowAreRefused) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_THROW((void)ones({4}).narrow(0, 1, kMax), IndexError);
  EXPECT_EQ(ones({4}).slice(0, 0, 4, kMax).shape(), (Shape{1}));
  EXPECT_EQ(ones({4, 4}).slice(0, 0, std::nullopt, kMax / 2).shape(), (Shape{1, 4}));
  EXPECT_CONTAINS(error_of<ShapeError>([] {
                    (void)ones({4}).reshape({int64_t{1} << 32, int64_t{1} << 32, -1});
                  }),
                  "more elements than a 64-bit count holds");
  EXPECT_CONTAINS(error_of<ShapeError>([] { (void)zeros({0}).reshape({0, kMax, kMax}); }), "too large to index");
  EXPECT_CONTAINS(error_of<ShapeError>([] {
                    (void)zeros({1, 1}).expand({int64_t{1} << 32, int64_t{1} << 32});
                  }),
                  "more elements than a 64-bit count holds");
  const Tensor wide = zeros({1}).expand({int64_t{1} << 62});
  EXPECT_THROW((void)cat({wide, wide, wide, wide}), ShapeError);
}

TEST(ViewsOfUndefinedTensors, AreErrorsNotCrashes) {
  const Tensor u;
  EXPECT_THROW((void)u.reshape({1}), InvalidArgumentError);
  EXPECT_THROW((void)u.unsqueeze(0), InvalidArgumentError);
  EXPECT_THROW((void)u.expand({3}), InvalidArgumentError);
  EXPECT_THROW((void)u.detach(), InvalidArgumentError);
  EXPECT_THROW((void)u.clone(), InvalidArgumentError);
  EXPECT_THROW((void)u.to(DType::F64), InvalidArgumentError);
  Tensor v;
  EXPECT_THROW(v.fill_(1), InvalidArgumentError);
  EXPECT_THROW(v.copy_(ones({})), InvalidArgumentError);
  Tensor t = ones({2});
  EXPECT_THROW(t.copy_(Tensor()), InvalidArgumentError);
}

TEST(ZeroDimensionalTensors, HaveNoSizeOrStride) {
  const Tensor s = ones({7}).select(0, 2);
  EXPECT_THROW((void)s.size(0), IndexError);
  EXPECT_THROW((void)s.stride(-1), IndexError);
}

TEST(CopyIntoOverlappingMemory, ReadsTheSourceBeforeWriting) {
  Tensor t = arange(5, DType::F32);
  t.narrow(0, 1, 4).copy_(t.narrow(0, 0, 4));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 0, 1, 2, 3}));
  Tensor u = arange(5, DType::F32);
  u.narrow(0, 0, 4).copy_(u.narrow(0, 1, 4));
  EXPECT_EQ(u.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 4}));
  // A destination whose elements share memory has no meaningful result.
  EXPECT_CONTAINS(error_of<InvalidArgumentError>([] { (void)zeros({1}).expand({4}).copy_(arange(4, DType::F32)); }),
                  "has elements that share memory");
}

}  // namespace
}  // namespace strata
