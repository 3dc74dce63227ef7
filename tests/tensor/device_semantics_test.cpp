// The contract of docs/architecture.md, "Copies are explicit": to / copy_to / pin_memory / item, and the counters that
// make host<->device traffic visible.

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "strata/core/error.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/stream.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

#define STRATA_REQUIRE_CUDA() STRATA_SKIP_WITHOUT_CUDA()

const Device kGpu0(DeviceType::CUDA, 0);

class DeviceSemantics : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
};

TEST_P(DeviceSemantics, ToTheSameDeviceReturnsTheSameStorage) {
  const Tensor t = tensor<float>({1, 2, 3}, {}, device());
  const Tensor same = t.to(device());
  EXPECT_TRUE(same.shares_storage(t));
  EXPECT_EQ(same.data_ptr(), t.data_ptr());
  // "cuda" without an index means the current GPU, which is cuda:0 here.
  if (device().is_cuda()) {
    EXPECT_TRUE(t.to(Device("cuda")).shares_storage(t));
  }
  EXPECT_TRUE(t.to(t.dtype()).shares_storage(t));
}

TEST_P(DeviceSemantics, CopyToAlwaysAllocatesNewStorage) {
  const Tensor t = tensor<float>({1, 2, 3}, {}, device());
  Tensor copy = t.copy_to(device());
  EXPECT_FALSE(copy.shares_storage(t));
  EXPECT_EQ(copy.device(), device());
  EXPECT_EQ(copy.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  copy.fill_(0);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST_P(DeviceSemantics, CopyToOfAViewCopiesOnlyTheView) {
  const Tensor t = tensor<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}, device()).t();
  const Tensor copy = t.copy_to(kCPU);
  EXPECT_TRUE(copy.is_contiguous());
  EXPECT_EQ(copy.shape(), (Shape{3, 2}));
  EXPECT_EQ(copy.to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
}

TEST_P(DeviceSemantics, CopyToCarriesTheGradientBack) {
  Tensor x = tensor<float>({1, 2, 3}, {}, device());
  x.requires_grad_();
  const Tensor copy = x.copy_to(device());
  ASSERT_TRUE(copy.requires_grad());
  sum(copy * tensor<float>({4, 5, 6}, {}, device())).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), device());
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 5, 6}));
}

TEST_P(DeviceSemantics, ToDtypeConverts) {
  const Tensor t = tensor<float>({1.5f, -2.75f, 300}, {}, device());
  const Tensor ints = t.to(DType::I32);
  EXPECT_EQ(ints.dtype(), DType::I32);
  EXPECT_EQ(ints.device(), device());
  EXPECT_FALSE(ints.shares_storage(t));
  EXPECT_EQ(ints.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 300}));
  EXPECT_EQ(t.to(DType::F16).to_vector<float>(), (std::vector<float>{1.5f, -2.75f, 300}));
  EXPECT_EQ(t.to(DType::Bool).to_vector<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(tensor<int64_t>({0, 5}, {}, device()).to(DType::Bool).to_vector<bool>(), (std::vector<bool>{false, true}));
}

TEST_P(DeviceSemantics, ToDeviceAndDtypeInOneCall) {
  const Tensor t = tensor<float>({1.5f, -2.0f, 3.25f}, {}, kCPU);
  const Tensor wide = t.to(device(), DType::F64);
  EXPECT_EQ(wide.device(), device());
  EXPECT_EQ(wide.dtype(), DType::F64);
  EXPECT_EQ(wide.to_vector<double>(), (std::vector<double>{1.5, -2.0, 3.25}));
  const Tensor narrow = wide.to(kCPU, DType::I32);
  EXPECT_EQ(narrow.device(), kCPU);
  EXPECT_EQ(narrow.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
  // Nothing to do: the tensor itself.
  EXPECT_TRUE(t.to(kCPU, DType::F32).is_same(t));
}

TEST_P(DeviceSemantics, ToDeviceAndDtypeCarriesTheGradientBack) {
  Tensor t = tensor<float>({1, 2}, {}, kCPU);
  t.requires_grad_();
  sum(t.to(device(), DType::F64) * 3.0).backward();
  EXPECT_EQ(t.grad().dtype(), DType::F32);
  EXPECT_EQ(t.grad().device(), kCPU);
  EXPECT_EQ(t.grad().to_vector<float>(), (std::vector<float>{3, 3}));
}

TEST_P(DeviceSemantics, ItemAndToVectorReadValuesOnTheHost) {
  EXPECT_EQ(scalar_tensor(2.5, device()).item<float>(), 2.5f);
  const Tensor one = tensor<int64_t>({42}, {}, device());
  EXPECT_EQ(one.item().to_int(), 42);
  EXPECT_FALSE(one.item().is_floating());
  EXPECT_EQ(tensor<float>({1, 2, 3, 4}, {2, 2}, device())[1][0].item<double>(), 3.0);
  EXPECT_THROW(tensor<float>({1, 2}, {}, device()).item(), ShapeError);
  // to_vector converts to the requested type.
  EXPECT_EQ(tensor<float>({1.75f, -1.75f}, {}, device()).to_vector<int64_t>(), (std::vector<int64_t>{1, -1}));
}

TEST_P(DeviceSemantics, ZeroSizeTensorsWorkEverywhere) {
  const Tensor empty_rows = zeros({0, 3}, device());
  EXPECT_EQ(empty_rows.numel(), 0);
  EXPECT_EQ(empty_rows.shape(), (Shape{0, 3}));
  EXPECT_TRUE(empty_rows.to_vector<float>().empty());
  EXPECT_EQ(empty_rows.copy_to(kCPU).shape(), (Shape{0, 3}));
  EXPECT_EQ(empty_rows.clone().numel(), 0);
  EXPECT_EQ(empty_rows.to(DType::I64).dtype(), DType::I64);
  EXPECT_EQ(empty_rows.t().contiguous().shape(), (Shape{3, 0}));
  EXPECT_EQ(empty_rows.reshape({3, -1, 2}).shape(), (Shape{3, 0, 2}));
  EXPECT_THROW(empty_rows.item(), ShapeError);
  Tensor filled = empty({4, 0}, device());
  filled.fill_(1);  // nothing to do, but no error
  EXPECT_EQ(cat({empty_rows, ones({2, 3}, device())}).shape(), (Shape{2, 3}));
}

TEST_P(DeviceSemantics, CpuToCpuCopiesAreNotCounted) {
  const Tensor host = tensor<float>({1, 2, 3});
  reset_transfer_counters();
  host.copy_to(kCPU);
  host.to(kCPU);
  host.to_vector<float>();
  host[0].item<float>();
  const TransferCounters c = transfer_counters();
  EXPECT_EQ(c.host_to_device_copies, 0);
  EXPECT_EQ(c.device_to_host_copies, 0);
  EXPECT_EQ(c.device_to_device_copies, 0);
  EXPECT_EQ(c.synchronizations, 0);
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceSemantics, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

TEST(DeviceSemanticsPinned, PinMemoryGivesPinnedHostMemory) {
  const Tensor host = tensor<float>({1, 2, 3});
  EXPECT_FALSE(host.is_pinned());
  const Tensor pinned = host.pin_memory();
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_EQ(pinned.device(), kCPU);
  EXPECT_FALSE(pinned.shares_storage(host));
  EXPECT_EQ(pinned.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_TRUE(pinned.pin_memory().shares_storage(pinned));  // already pinned
  EXPECT_TRUE(empty({2}, TensorOptions().pinned()).is_pinned());
}

TEST(DeviceSemanticsCuda, NonBlockingCopyFromPinnedMemoryDoesNotSynchronise) {
  STRATA_REQUIRE_CUDA();
  std::vector<float> values(1 << 20);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000);
  const Tensor pinned = tensor(values).pin_memory();
  synchronize(kGpu0);
  reset_transfer_counters();
  const Tensor gpu = pinned.to(kGpu0, /*non_blocking=*/true);
  TransferCounters c = transfer_counters();
  EXPECT_EQ(c.host_to_device_copies, 1);
  EXPECT_EQ(c.host_to_device_bytes, static_cast<int64_t>(values.size() * sizeof(float)));
  EXPECT_EQ(c.synchronizations, 0);
  synchronize(kGpu0);
  EXPECT_EQ(transfer_counters().synchronizations, 1);
  EXPECT_EQ(gpu.to_vector<float>(), values);
}

TEST(DeviceSemanticsCuda, BlockingCopiesFromPageableMemorySynchronise) {
  STRATA_REQUIRE_CUDA();
  const Tensor host = tensor<float>({1, 2, 3, 4});
  reset_transfer_counters();
  const Tensor gpu = host.to(kGpu0, /*non_blocking=*/true);  // pageable: copied synchronously anyway
  EXPECT_EQ(transfer_counters().synchronizations, 1);
  EXPECT_EQ(gpu.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(DeviceSemanticsCuda, HostDeviceCopiesAndSynchronisationsAreCounted) {
  STRATA_REQUIRE_CUDA();
  const Tensor host = tensor<float>({1, 2, 3, 4});
  reset_transfer_counters();
  const Tensor gpu = host.to(kGpu0);
  TransferCounters c = transfer_counters();
  EXPECT_EQ(c.host_to_device_copies, 1);
  EXPECT_EQ(c.host_to_device_bytes, 16);
  EXPECT_EQ(c.device_to_host_copies, 0);

  const Tensor back = gpu.to(kCPU);
  c = transfer_counters();
  EXPECT_EQ(c.device_to_host_copies, 1);
  EXPECT_EQ(c.device_to_host_bytes, 16);
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));

  const int64_t syncs_before_item = c.synchronizations;
  EXPECT_EQ(gpu[2].item<float>(), 3.0f);
  c = transfer_counters();
  EXPECT_EQ(c.device_to_host_copies, 2);
  EXPECT_EQ(c.device_to_host_bytes, 20);
  EXPECT_EQ(c.synchronizations, syncs_before_item + 1);

  // Work that stays on the GPU is not a transfer.
  const Tensor on_gpu = gpu.view({2, 2}).t().contiguous();
  gpu.clone();
  EXPECT_EQ(transfer_counters().device_to_host_copies, 2);
  EXPECT_EQ(on_gpu.device(), kGpu0);
}

TEST(DeviceSemanticsCuda, CopyToAnotherDeviceKeepsTheSource) {
  STRATA_REQUIRE_CUDA();
  const Tensor host = tensor<int32_t>({5, 6});
  const Tensor gpu = host.copy_to(kGpu0);
  EXPECT_EQ(gpu.device(), kGpu0);
  EXPECT_FALSE(gpu.shares_storage(host));
  EXPECT_EQ(gpu.to(kCPU).to_vector<int32_t>(), (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(gpu.to(kGpu0).shares_storage(gpu));
  EXPECT_FALSE(gpu.copy_to(kGpu0).shares_storage(gpu));
}

// A model split over two devices trains on both sides of the split: the gradient crosses back to the host.
TEST(DeviceSemanticsCuda, GradientsCrossTheDeviceBoundary) {
  STRATA_REQUIRE_CUDA();
  Tensor x = tensor<float>({1, 2, 3});
  x.requires_grad_();
  Tensor w = tensor<float>({4, 5, 6}, {}, kGpu0);
  w.requires_grad_();
  sum(x.to(kGpu0) * w).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), kCPU);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(w.grad().device(), kGpu0);
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

}  // namespace
}  // namespace strata
