// Every op on every available device, compared with the CPU on the same inputs (ggml's test-backend-ops idea).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "strata/runtime/cuda.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

struct OpCase {
  std::string name;
  std::function<Tensor(const std::vector<Tensor>&)> run;
};

std::vector<OpCase> op_cases() {
  using V = const std::vector<Tensor>&;
  const auto idx = [](V x) { return x[3]; };
  return {
      {"add", [](V x) { return add(x[0], x[1], 0.5); }},
      {"sub_broadcast", [](V x) { return sub(x[0], x[2]); }},
      {"mul", [](V x) { return mul(x[0], x[1]); }},
      {"div", [](V x) { return div(x[0], add(abs(x[1]), abs(x[2]) + 1.0)); }},
      {"pow", [](V x) { return pow(abs(x[0]), 1.5); }},
      {"unary_chain", [](V x) { return sigmoid(tanh(exp(neg(x[0])))); }},
      {"log_sqrt_rsqrt", [](V x) { return add(log(abs(x[0]) + 1.0), sqrt(abs(x[1])) * rsqrt(abs(x[1]) + 1.0)); }},
      {"relu_gelu_clamp", [](V x) { return add(relu(x[0]), clamp(gelu(x[1]), Scalar(-0.5), Scalar(0.5))); }},
      {"where_compare", [](V x) { return where(gt(x[0], x[1]), x[0], x[1]); }},
      {"maximum_minimum", [](V x) { return maximum(x[0], minimum(x[1], x[2])); }},
      {"transposed_input", [](V x) { return (x[0].t() * 2.0).contiguous(); }},
      {"sum_mean", [](V x) { return add(sum(x[0], {1}), mean(x[1], {1})); }},
      {"max_min", [](V x) { return sub(max(x[0], {0}), min(x[1], {0})); }},
      {"argmax", [](V x) { return argmax(x[0], 1).to(DType::F32); }},
      {"var_norm", [](V x) { return add(var(x[0], {1}), norm(x[1], 2.0, {1})); }},
      {"logsumexp", [](V x) { return logsumexp(x[0], {1}); }},
      {"softmax", [](V x) { return softmax(x[0], 1); }},
      {"log_softmax", [](V x) { return log_softmax(x[1], 0); }},
      {"matmul", [](V x) { return matmul(x[0], x[1].t()); }},
      {"addmm", [](V x) { return addmm(x[2].narrow(0, 0, 8), x[0], x[1].t(), 0.5, 2.0); }},
      {"index_select", [idx](V x) { return index_select(x[0], 0, idx(x)); }},
      {"gather", [idx](V x) { return gather(x[0], 1, idx(x).reshape({1, 4}).expand({8, 4}).contiguous()); }},
      {"scatter_add", [idx](V x) { return scatter_add(zeros_like(x[0]), 0, idx(x).reshape({4, 1}).expand({4, 16}).contiguous(), x[1].narrow(0, 0, 4).contiguous()); }},
      {"cat_stack", [](V x) { return cat({x[0], stack({x[1].select(0, 0), x[1].select(0, 1)})}, 0); }},
      {"to_f16_and_back", [](V x) { return x[0].to(DType::F16).to(DType::F32); }},
  };
}

class CrossDevice : public ::testing::TestWithParam<Device> {};

TEST_P(CrossDevice, EveryOpMatchesTheCpu) {
  const Device device = GetParam();
  // cuda:0 stays the current device: an op runs on its tensors' device whatever is current (on cuda:1 and up, a
  // kernel launched on the current device would run on the wrong GPU or fail). Without a GPU there is none to keep.
  std::optional<cuda::DeviceGuard> current;
  if (cuda::is_available()) current.emplace(0);
  manual_seed(7);
  const std::vector<Tensor> host = {randn({8, 16}), randn({8, 16}), randn({16}), tensor<int64_t>({5, 0, 7, 2})};
  std::vector<Tensor> moved;
  for (const Tensor& t : host) moved.push_back(t.to(device));
  for (const OpCase& op : op_cases()) {
    SCOPED_TRACE(op.name);
    const auto expected = op.run(host).to_vector<float>();
    const Tensor got_tensor = op.run(moved);
    EXPECT_EQ(got_tensor.device(), device);
    const auto got = got_tensor.to_vector<float>();
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-4 + 1e-4 * std::abs(expected[i])) << "element " << i;
    }
  }
}

// Every device but cpu:0, the reference: the GPUs, and cpu:1 and up when virtual CPU devices are on.
std::vector<Device> other_devices() {
  std::vector<Device> devices;
  for (Device d : testing::available_devices()) {
    if (d != kCPU) devices.push_back(d);
  }
  return devices;
}

INSTANTIATE_TEST_SUITE_P(OtherDevices, CrossDevice, ::testing::ValuesIn(other_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CrossDevice);

TEST(CrossDeviceOnThisMachine, RunsWhereAGpuIsPresent) {
  STRATA_SKIP_WITHOUT_CUDA();
  EXPECT_FALSE(other_devices().empty());
}

// The CPU against itself with non-contiguous copies of the inputs: the same table, exercising strided paths here.
TEST(CrossDeviceOnThisMachine, StridedInputsMatchContiguousOnes) {
  manual_seed(7);
  const std::vector<Tensor> host = {randn({8, 16}), randn({8, 16}), randn({16}), tensor<int64_t>({5, 0, 7, 2})};
  std::vector<Tensor> strided;
  for (const Tensor& t : host) {
    if (t.dim() != 2) {
      strided.push_back(t);
      continue;
    }
    strided.push_back(t.t().contiguous().t());  // same values, column-major layout
  }
  for (const OpCase& op : op_cases()) {
    SCOPED_TRACE(op.name);
    const auto expected = op.run(host).to_vector<float>();
    const auto got = op.run(strided).to_vector<float>();
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-4 + 1e-4 * std::abs(expected[i])) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace strata
