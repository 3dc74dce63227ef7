// Every ordered pair of available devices: two CPU devices with STRATA_CPU_DEVICES=2 (Note [Virtual CPU devices]),
// the CPU and each GPU, two GPUs. The suite has no instance on a machine with a single device; CI runs it with two
// virtual CPU devices (tests/CMakeLists.txt).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/nn/layers.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "test_devices.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

class DevicePairs : public ::testing::TestWithParam<std::pair<Device, Device>> {
 protected:
  Device from() const { return GetParam().first; }
  Device to() const { return GetParam().second; }
};

TEST_P(DevicePairs, MixingTheTwoIsADeviceMismatchNamingBoth) {
  const Tensor a = ones({3}, from());
  const Tensor b = ones({3}, to());
  try {
    (void)add(a, b);
    ADD_FAILURE() << "no error adding a tensor on " << from() << " to one on " << to();
  } catch (const DeviceMismatchError& e) {
    EXPECT_THAT(e.what(), HasSubstr(from().str()));
    EXPECT_THAT(e.what(), HasSubstr(to().str()));
  }
  EXPECT_THROW((void)matmul(ones({2, 2}, from()), ones({2, 2}, to())), DeviceMismatchError);
}

TEST_P(DevicePairs, ACopyMovesTheValuesAndIsCountedByKind) {
  const Tensor src = arange(0, 6, 1, TensorOptions(DType::F32).device(from())).reshape({2, 3}).t();  // a view
  reset_transfer_counters();
  const Tensor dst = src.to(to());
  const TransferCounters c = transfer_counters();
  EXPECT_EQ(dst.device(), to());
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  const int64_t bytes = 6 * sizeof(float);
  if (from().is_cpu() && !to().is_cpu()) {
    EXPECT_EQ(c.host_to_device_copies, 1);
    EXPECT_EQ(c.host_to_device_bytes, bytes);
  } else if (!from().is_cpu() && to().is_cpu()) {
    EXPECT_EQ(c.device_to_host_copies, 1);
    EXPECT_EQ(c.device_to_host_bytes, bytes);
  } else {  // two CPU devices, or two GPUs
    EXPECT_EQ(c.device_to_device_copies, 1);
    EXPECT_EQ(c.device_to_device_bytes, bytes);
    EXPECT_EQ(c.host_to_device_copies + c.device_to_host_copies, 0);
  }
  EXPECT_FALSE(dst.to(from()).shares_storage(src));
}

TEST_P(DevicePairs, EachSideAllocatesFromItsOwnAllocator) {
  EXPECT_NE(&allocator(from()), &allocator(to()));
  const int64_t before = memory_stats(to()).allocated_bytes.current;
  const Tensor moved = zeros({256}, from()).to(to());
  EXPECT_EQ(memory_stats(to()).allocated_bytes.current - before, 1024);
}

TEST_P(DevicePairs, TheGradientComesBackToTheSourceDevice) {
  Tensor x = tensor<float>({1, 2, 3}, {}, from());
  x.requires_grad_();
  const Tensor weights = tensor<float>({4, 5, 6}, {}, to());
  reset_transfer_counters();
  sum(x.to(to()) * weights).backward();
  // Counted before the gradient is read back: to_vector from a GPU is a copy of its own.
  const TransferCounters c = transfer_counters();
  EXPECT_EQ(c.host_to_device_copies + c.device_to_host_copies + c.device_to_device_copies, 2)
      << "one copy forward, one for the gradient";
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), from());
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 5, 6}));
}

// A two-layer MLP with its first layer on one device and its second on the other gets the same gradients and loss as
// the same model on one device: bit for bit when both devices are of one kind (they run the same kernels), within
// float tolerance between a CPU and a GPU.
TEST_P(DevicePairs, ASplitMlpGetsTheGradientsOfTheSameModelOnOneDevice) {
  manual_seed(11);
  const Tensor input = randn({16, 12});
  const Tensor target = randint(0, 5, {16});
  nn::Linear first_layer(12, 32), second_layer(32, 5);

  const auto run = [&](Device a, Device b) {
    std::vector<Tensor> params;
    for (const Tensor& p : {first_layer.weight, first_layer.bias}) params.push_back(p.detach().to(a).requires_grad_());
    for (const Tensor& p : {second_layer.weight, second_layer.bias}) params.push_back(p.detach().to(b).requires_grad_());
    const Tensor hidden = relu(nn::functional::linear(input.to(a), params[0], params[1]));
    const Tensor logits = nn::functional::linear(hidden.to(b), params[2], params[3]);
    const Tensor loss = nn::functional::cross_entropy(logits, target.to(b));
    loss.backward();
    std::vector<std::vector<float>> values{loss.to_vector<float>()};
    for (const Tensor& p : params) {
      EXPECT_TRUE(p.grad().defined());
      if (p.grad().defined()) values.push_back(p.grad().to_vector<float>());
    }
    EXPECT_EQ(params[0].grad().device(), a);
    EXPECT_EQ(params[2].grad().device(), b);
    return values;
  };
  const auto one_device = run(from(), from());
  const auto split = run(from(), to());
  ASSERT_EQ(split.size(), one_device.size());
  const bool same_kind = from().type() == to().type();
  for (std::size_t t = 0; t < split.size(); ++t) {
    SCOPED_TRACE(t == 0 ? "the loss" : "the gradient of parameter " + std::to_string(t - 1));
    ASSERT_EQ(split[t].size(), one_device[t].size());
    if (same_kind) {
      EXPECT_EQ(std::memcmp(split[t].data(), one_device[t].data(), split[t].size() * sizeof(float)), 0);
    } else {
      for (std::size_t i = 0; i < split[t].size(); ++i) {
        EXPECT_NEAR(split[t][i], one_device[t][i], 1e-5 + 1e-4 * std::abs(one_device[t][i])) << "element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, DevicePairs, ::testing::ValuesIn(testing::available_device_pairs()),
                         [](const auto& info) { return testing::device_pair_test_name(info.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DevicePairs);

}  // namespace
}  // namespace strata
