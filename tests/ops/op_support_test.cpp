// strata::supports: what the op table says a device type can run (Note [What the op table knows about dtypes]).
#include <gtest/gtest.h>

#include <algorithm>
#include <source_location>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/ops/kernel_table.h"
#include "strata/ops/op_support.h"
#include "strata/runtime/cuda.h"
#include "strata/tensor/factories.h"

namespace strata {
namespace {

TEST(Supports, AnswersPerDTypeWhereTheRegistrationListsThem) {
  EXPECT_TRUE(supports(DeviceType::CPU, "add", DType::F32));
  EXPECT_TRUE(supports(DeviceType::CPU, "add", DType::Bool));
  EXPECT_TRUE(supports(DeviceType::CPU, "exp", DType::BF16));
  EXPECT_FALSE(supports(DeviceType::CPU, "exp", DType::I64));  // transcendentals are floating only
  EXPECT_FALSE(supports(DeviceType::CPU, "div", DType::I32));
  EXPECT_FALSE(supports(DeviceType::CPU, "neg", DType::Bool));
  EXPECT_TRUE(supports(DeviceType::CPU, "copy", DType::U8));
  EXPECT_TRUE(supports(DeviceType::CPU, "max_pool2d", DType::F16));
  EXPECT_FALSE(supports(DeviceType::CPU, "max_pool2d", DType::I32));
}

// Where a registration lists no dtypes the table knows only that a kernel exists, and says so for every dtype.
TEST(Supports, AnswersAtTheOpLevelWhereTheRegistrationListsNone) {
  EXPECT_TRUE(supports(DeviceType::CPU, "gemm"));
  EXPECT_TRUE(supports(DeviceType::CPU, "gemm", DType::Bool));
  for (const auto& row : ops::kernel_table()) {
    if (row.op == "gemm") {
      EXPECT_FALSE(row.dtypes[static_cast<int>(DeviceType::CPU)].has_value());
    }
  }
}

// The dtype lists are the kernels' own: for every elementwise unary kernel and every dtype, the kernel runs exactly
// where supports() says it does and throws DTypeError elsewhere.
TEST(Supports, AgreesWithWhatTheUnaryKernelsRun) {
  for (const char* op : {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh",
                         "sin", "cos", "erf"}) {
    const ops::KernelSlot<ops::UnaryFn> slot(op);
    for (int d = 0; d < kDTypeCount; ++d) {
      const auto dtype = static_cast<DType>(d);
      SCOPED_TRACE(fmt::format("{} on {}", op, dtype));
      const Tensor in = ones({4}, dtype);
      const Tensor out = empty({4}, dtype);
      const ops::OpCall call{op, kCPU, nullptr, std::source_location::current()};
      bool ran = true;
      try {
        slot.get(kCPU)(call, out.view(), in.view());
      } catch (const DTypeError&) {
        ran = false;
      }
      EXPECT_EQ(ran, supports(DeviceType::CPU, op, dtype));
    }
  }
}

TEST(Supports, IsFalseForADeviceTypeWithoutTheKernel) {
  // The CUDA column fills when the plugin loads, which asking does; without a GPU there is no CUDA kernel.
  EXPECT_EQ(supports(DeviceType::CUDA, "add", DType::F32), cuda::is_available());
  EXPECT_EQ(supports(DeviceType::CUDA, "add"), cuda::is_available());
}

TEST(Supports, AnUnknownOpIsAnErrorNamingIt) {
  try {
    (void)supports(DeviceType::CPU, "addd", DType::F32);
    FAIL() << "no exception";
  } catch (const InvalidArgumentError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("supports: the op table has no op named 'addd'"), std::string::npos) << message;
    EXPECT_NE(message.find("add, "), std::string::npos) << message;  // the known names follow
  }
}

TEST(Supports, OpNamesAreSortedAndIncludeEveryFamily) {
  const std::vector<std::string> names = op_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char* op : {"add", "copy", "reduce", "softmax", "gemm", "index_select", "max_pool2d", "arange"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), op), names.end()) << op;
  }
}

}  // namespace
}  // namespace strata
