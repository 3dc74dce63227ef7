#include <gtest/gtest.h>

#include <limits>

#include "strata/core/error.h"
#include "strata/runtime/parallel.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_checks.h"
#include "test_devices.h"
#include "test_fixtures.h"

namespace strata {
namespace {

class Indexing : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  /// Runs an op whose kernel should fail, and returns the message of its device-side assert ("" if none).
  template <typename Op>
  std::string assert_message(Op&& op) const {
    return testing::device_assert_message(device(), std::forward<Op>(op));
  }
};

TEST_P(Indexing, IndexSelectPicksRowsAndColumns) {
  const Tensor a = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3}, device());
  const Tensor cols = tensor<int64_t>({2, 0, 2}, {}, device());
  EXPECT_EQ(index_select(a, 1, cols).to_vector<float>(), (std::vector<float>{3, 1, 3, 6, 4, 6}));
  const Tensor rows = tensor<int32_t>({1}, {}, device());
  const Tensor picked = index_select(a, 0, rows);
  EXPECT_EQ(picked.shape(), (Shape{1, 3}));
  EXPECT_EQ(picked.to_vector<float>(), (std::vector<float>{4, 5, 6}));
}

TEST_P(Indexing, IndexSelectOnNonContiguousInput) {
  // The transpose of [[1,2,3],[4,5,6]] built by strides: [[1,4],[2,5],[3,6]].
  const Tensor a = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3}, device());
  const Tensor t(a.storage(), DType::F32, {3, 2}, {1, 3}, 0);
  const Tensor out = index_select(t, 0, tensor<int64_t>({2, 1}, {}, device()));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{3, 6, 2, 5}));
}

TEST_P(Indexing, OutOfRangeIndexIsADeviceAssertNamingTheValue) {
  const Tensor a = zeros({4, 5}, TensorOptions().device(device()));
  // One bad index: with two, which one reports first is a race between GPU threads (Note [Device-side asserts]).
  const std::string message = assert_message([&] { index_select(a, 0, tensor<int64_t>({0, 7, 1, 3}, {}, device())); });
  ASSERT_FALSE(message.empty()) << "no DeviceAssertError";
  EXPECT_NE(message.find("index_select"), std::string::npos) << message;
  EXPECT_NE(message.find("value 7"), std::string::npos) << message;
  EXPECT_NE(message.find("element 1"), std::string::npos) << message;
  EXPECT_NE(message.find("[0, 4)"), std::string::npos) << message;
  // The launch site as the repository names it, not by the build machine's path.
  EXPECT_NE(message.find("launched from strata/tensor/indexing.cpp:"), std::string::npos) << message;
  // On the CPU the op that launched the kernel reports it: there is nothing for STRATA_LAUNCH_BLOCKING to move.
  if (device().is_cpu()) {
    EXPECT_EQ(message.find("STRATA_LAUNCH_BLOCKING"), std::string::npos) << message;
  }
  // Reported once: the slot is clear again and later work runs normally.
  synchronize(device());
  EXPECT_EQ(index_select(a, 0, tensor<int64_t>({3}, {}, device())).numel(), 5);
}

TEST_P(Indexing, GatherAlongLastDim) {
  const Tensor a = tensor<float>({10, 11, 12, 20, 21, 22}, {2, 3}, device());
  const Tensor idx = tensor<int64_t>({2, 0, 1, 1}, {2, 2}, device());
  EXPECT_EQ(gather(a, 1, idx).to_vector<float>(), (std::vector<float>{12, 10, 21, 21}));
  EXPECT_EQ(gather(a, 0, tensor<int64_t>({1, 0, 1}, {1, 3}, device())).to_vector<float>(),
            (std::vector<float>{20, 11, 22}));
}

TEST_P(Indexing, GatherRejectsMismatchedRank) {
  const Tensor a = zeros({2, 3}, TensorOptions().device(device()));
  EXPECT_THROW(gather(a, 1, tensor<int64_t>({0, 1}, {}, device())), ShapeError);
  EXPECT_THROW(gather(a, 1, tensor<float>({0, 1}, {1, 2}, device())), DTypeError);
}

TEST_P(Indexing, ScatterAddAccumulatesDuplicates) {
  const Tensor base = zeros({5}, TensorOptions().device(device()));
  const Tensor idx = tensor<int64_t>({0, 1, 0, 4, 0}, {}, device());
  const Tensor src = tensor<float>({1, 2, 3, 4, 5}, {}, device());
  EXPECT_EQ(scatter_add(base, 0, idx, src).to_vector<float>(), (std::vector<float>{9, 2, 0, 0, 4}));
  EXPECT_EQ(base.to_vector<float>(), (std::vector<float>(5, 0.0f))) << "scatter_add must not modify its input";
}

TEST_P(Indexing, ScatterAddIn2DAlongDim1) {
  const Tensor base = zeros({2, 3}, TensorOptions(DType::I64).device(device()));
  const Tensor idx = tensor<int64_t>({2, 2, 0, 1}, {2, 2}, device());
  const Tensor src = tensor<int64_t>({1, 2, 3, 4}, {2, 2}, device());
  EXPECT_EQ(scatter_add(base, 1, idx, src).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 3, 3, 4, 0}));
}

TEST_P(Indexing, OneHotOfLabels) {
  const Tensor labels = tensor<int64_t>({2, 0, 1}, {}, device());
  const Tensor out = one_hot(labels, 3);
  EXPECT_EQ(out.shape(), (Shape{3, 3}));
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(one_hot(labels, -1).shape(), (Shape{3, 3})) << "num_classes inferred from the data";
  // Inferring from a label of 2^63-1 would overflow; a negative one names itself.
  EXPECT_THROW(one_hot(tensor<int64_t>({std::numeric_limits<int64_t>::max()}, {}, device()), -1), InvalidArgumentError);
  EXPECT_THROW(one_hot(tensor<int64_t>({-5}, {}, device()), -1), InvalidArgumentError);
}

TEST_P(Indexing, OneHotOutOfRangeLabelIsADeviceAssert) {
  const std::string message = assert_message([&] { one_hot(tensor<int64_t>({0, 5, 1}, {}, device()), 3); });
  ASSERT_FALSE(message.empty());
  EXPECT_NE(message.find("one_hot"), std::string::npos) << message;
  EXPECT_NE(message.find("value 5"), std::string::npos) << message;
  EXPECT_NE(message.find("element 1"), std::string::npos) << message;
}

TEST_P(Indexing, ZeroSizeIndexGivesEmptyResult) {
  const Tensor a = zeros({4, 2}, TensorOptions().device(device()));
  const Tensor none = empty({0}, TensorOptions(DType::I64).device(device()));
  EXPECT_EQ(index_select(a, 0, none).shape(), (Shape{0, 2}));
}

// Note [Scatter-add adds in one order]: along every dim, with an index smaller than the source and big enough to
// run on several threads, the CPU's scatter_add gives the bits of a loop over the index in order, on one thread or
// on four (the values are not integers: another order of additions would show in the last bits).
TEST(ScatterAddOnTheCpu, AddsInIndexOrderWhateverTheThreads) {
  const testing::PoolSize pool(4);
  const Shape out_shape{5, 9, 70}, src_shape{6, 9, 80}, index_shape{4, 8, 60};
  for (int64_t dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE(dim);
    Shape shape = index_shape;
    shape[dim] = dim == 0 ? 400 : dim == 1 ? 300 : 500;  // many entries per output element along dim
    Shape src_of_dim = src_shape;
    src_of_dim[dim] = shape[dim];
    const Tensor source = randn(src_of_dim);
    const std::vector<float> from = source.to_vector<float>();
    std::vector<int64_t> at(static_cast<size_t>(shape[0] * shape[1] * shape[2]));
    uint64_t state = 17 + static_cast<uint64_t>(dim);
    for (int64_t& a : at) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      a = static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(out_shape[dim]));
    }
    std::vector<float> expected(static_cast<size_t>(out_shape[0] * out_shape[1] * out_shape[2]), 0.0f);
    size_t i = 0;
    for (int64_t a = 0; a < shape[0]; ++a) {
      for (int64_t b = 0; b < shape[1]; ++b) {
        for (int64_t c = 0; c < shape[2]; ++c, ++i) {
          int64_t coords[3] = {a, b, c};
          const float v = from[static_cast<size_t>((a * src_of_dim[1] + b) * src_of_dim[2] + c)];
          coords[dim] = at[i];
          expected[static_cast<size_t>((coords[0] * out_shape[1] + coords[1]) * out_shape[2] + coords[2])] += v;
        }
      }
    }
    const Tensor index = tensor<int64_t>(at, shape);
    for (const int budget : {4, 1}) {
      detail::pin_thread_budget(budget);
      EXPECT_EQ(scatter_add(zeros(out_shape), dim, index, source).to_vector<float>(), expected)
          << "on " << budget << " threads";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Indexing, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
