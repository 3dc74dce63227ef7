#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "strata/runtime/transfer.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

// Expected strings follow torch/_tensor_str.py with default options (without the "tensor(" prefix).

class Print : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  std::string at() const { return " @" + device().str() + ">"; }
  Tensor iota(int64_t n, DType dtype) const {
    std::vector<double> values(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
    return tensor(values, {}, device()).to(dtype);
  }
};

TEST_P(Print, FloatsGetFourDecimalsAlignedRight) {
  EXPECT_EQ(tensor<float>({1.5f, 2.25f, -3}, {}, device()).str(), "[ 1.5000,  2.2500, -3.0000]\n<Tensor 3 f32" + at());
  EXPECT_EQ(tensor<float>({0.1f, -12.345678f, 100}, {}, device()).str(),
            "[  0.1000, -12.3457, 100.0000]\n<Tensor 3 f32" + at());
}

TEST_P(Print, WholeFloatsPrintWithATrailingDot) {
  EXPECT_EQ(tensor<double>({1, 2, -30}, {}, device()).str(), "[  1.,   2., -30.]\n<Tensor 3 f64" + at());
  EXPECT_EQ(zeros({2}, device()).str(), "[0., 0.]\n<Tensor 2 f32" + at());
}

TEST_P(Print, WideRangesUseScientificNotation) {
  EXPECT_EQ(tensor<float>({1e-5f, 1}, {}, device()).str(), "[1.0000e-05, 1.0000e+00]\n<Tensor 2 f32" + at());
}

TEST_P(Print, NonFiniteValuesDoNotChooseTheFormat) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(tensor<float>({std::nanf(""), inf, 1.5f}, {}, device()).str(),
            "[   nan,    inf, 1.5000]\n<Tensor 3 f32" + at());
}

TEST_P(Print, IntegersAndBools) {
  EXPECT_EQ(tensor<int64_t>({1, 20, 3, 400, 5, -6}, {2, 3}, device()).str(),
            "[[  1,  20,   3],\n [400,   5,  -6]]\n<Tensor 2x3 i64" + at());
  EXPECT_EQ(tensor<bool>({true, false}, {}, device()).str(), "[ True, False]\n<Tensor 2 bool" + at());
  EXPECT_EQ(tensor<uint8_t>({7, 255}, {}, device()).str(), "[  7, 255]\n<Tensor 2 u8" + at());
}

TEST_P(Print, NestedDimensionsAreSeparatedByBlankLines) {
  EXPECT_EQ(iota(8, DType::I32).view({2, 2, 2}).str(),
            "[[[0, 1],\n  [2, 3]],\n\n [[4, 5],\n  [6, 7]]]\n<Tensor 2x2x2 i32" + at());
}

TEST_P(Print, ScalarsAndEmptyTensors) {
  EXPECT_EQ(scalar_tensor(3.5, device()).str(), "3.5000\n<Tensor scalar f32" + at());
  EXPECT_EQ(scalar_tensor(int64_t{-7}, TensorOptions(DType::I64).device(device())).str(),
            "-7\n<Tensor scalar i64" + at());
  EXPECT_EQ(zeros({0, 3}, device()).str(), "[]\n<Tensor 0x3 f32" + at());
}

TEST_P(Print, HalfPrecisionPrintsItsValues) {
  EXPECT_EQ(tensor<float>({0.5f, 1.25f}, {}, device()).to(DType::F16).str(), "[0.5000, 1.2500]\n<Tensor 2 f16" + at());
  EXPECT_EQ(tensor<float>({2, 4}, {}, device()).to(DType::BF16).str(), "[2., 4.]\n<Tensor 2 bf16" + at());
}

TEST_P(Print, LongRowsWrapAtEightyColumns) {
  EXPECT_EQ(iota(30, DType::F32).str(),
            "[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13., 14., 15.,\n"
            " 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27., 28., 29.]\n<Tensor 30 f32" +
                at());
}

TEST_P(Print, NonContiguousTensorsPrintInLogicalOrder) {
  EXPECT_EQ(tensor<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}, device()).t().str(),
            "[[1, 4],\n [2, 5],\n [3, 6]]\n<Tensor 3x2 i64" + at());
}

TEST_P(Print, BigTensorsAreSummarised) {
  EXPECT_EQ(iota(2000, DType::I64).str(), "[   0,    1,    2,  ..., 1997, 1998, 1999]\n<Tensor 2000 i64" + at());
  EXPECT_EQ(iota(10000, DType::I64).view({100, 100}).str(),
            "[[   0,    1,    2,  ...,   97,   98,   99],\n"
            " [ 100,  101,  102,  ...,  197,  198,  199],\n"
            " [ 200,  201,  202,  ...,  297,  298,  299],\n"
            " ...,\n"
            " [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n"
            " [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n"
            " [9900, 9901, 9902,  ..., 9997, 9998, 9999]]\n<Tensor 100x100 i64" +
                at());
}

TEST_P(Print, SummaryChoosesTheFormatFromTheShownValuesOnly) {
  // A hidden 0.5 in the middle would need decimals; only the shown ones count.
  Tensor ones_but_one = ones({2000}, device());
  ones_but_one.narrow(0, 1000, 1).fill_(0.5);
  EXPECT_EQ(ones_but_one.str(), "[1., 1., 1.,  ..., 1., 1., 1.]\n<Tensor 2000 f32" + at());
}

TEST_P(Print, SummarisedRowsWrapToo) {
  EXPECT_EQ(iota(6000, DType::F32).view({2, 3, 1000}).str(),
            "[[[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.9700e+02, 9.9800e+02,\n"
            "   9.9900e+02],\n"
            "  [1.0000e+03, 1.0010e+03, 1.0020e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
            "   1.9990e+03],\n"
            "  [2.0000e+03, 2.0010e+03, 2.0020e+03,  ..., 2.9970e+03, 2.9980e+03,\n"
            "   2.9990e+03]],\n"
            "\n"
            " [[3.0000e+03, 3.0010e+03, 3.0020e+03,  ..., 3.9970e+03, 3.9980e+03,\n"
            "   3.9990e+03],\n"
            "  [4.0000e+03, 4.0010e+03, 4.0020e+03,  ..., 4.9970e+03, 4.9980e+03,\n"
            "   4.9990e+03],\n"
            "  [5.0000e+03, 5.0010e+03, 5.0020e+03,  ..., 5.9970e+03, 5.9980e+03,\n"
            "   5.9990e+03]]]\n<Tensor 2x3x1000 f32" +
                at());
}

TEST_P(Print, StreamOperatorPrintsTheSameAsStr) {
  const Tensor t = tensor<float>({1, 2}, {}, device());
  std::ostringstream os;
  os << t;
  EXPECT_EQ(os.str(), t.str());
}

TEST_P(Print, PrintingCopiesOnlyTheShownValuesToTheHost) {
  const Tensor big = iota(10000, DType::I64).view({100, 100});
  reset_transfer_counters();
  big.str();
  const TransferCounters c = transfer_counters();
  if (device().is_cpu()) {
    EXPECT_EQ(c.device_to_host_copies, 0);
    EXPECT_EQ(c.synchronizations, 0);
  } else {
    EXPECT_EQ(c.device_to_host_copies, 1);
    EXPECT_EQ(c.device_to_host_bytes, 6 * 6 * 8);  // the 6x6 corner values, not all 10000
    EXPECT_GE(c.synchronizations, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Print, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

TEST(PrintUndefined, SaysSo) { EXPECT_EQ(Tensor().str(), "<Tensor undefined>"); }

}  // namespace
}  // namespace strata
