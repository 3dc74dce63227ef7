#include "strata/io/dlpack.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/registry.h"
#include "strata/tensor/factories.h"
#include "test_devices.h"

namespace strata {
namespace {

using io::from_dlpack;
using io::to_dlpack;

// A producer outside Strata: owns a buffer, counts how often its deleter runs.
struct ForeignTensor {
  std::vector<float> buffer;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int* deleted;
  DLManagedTensor managed{};
};

DLManagedTensor* make_foreign(std::vector<float> values, std::vector<int64_t> shape, std::vector<int64_t> strides,
                              int* deleted) {
  auto f = std::make_unique<ForeignTensor>(
      ForeignTensor{std::move(values), std::move(shape), std::move(strides), deleted, {}});
  DLTensor& dl = f->managed.dl_tensor;
  dl.data = f->buffer.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(f->shape.size());
  dl.dtype = {kDLFloat, 32, 1};
  dl.shape = f->shape.data();
  dl.strides = f->strides.empty() ? nullptr : f->strides.data();
  dl.byte_offset = 0;
  f->managed.manager_ctx = f.get();
  f->managed.deleter = [](DLManagedTensor* self) {
    std::unique_ptr<ForeignTensor> owned(static_cast<ForeignTensor*>(self->manager_ctx));
    ++*owned->deleted;
  };
  return &f.release()->managed;
}

TEST(DLPack, ToDLPackDescribesTheTensor) {
  const Tensor a = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  DLManagedTensor* m = to_dlpack(a);
  const DLTensor& dl = m->dl_tensor;
  EXPECT_EQ(dl.data, a.data_ptr());
  EXPECT_EQ(dl.byte_offset, 0u);
  EXPECT_EQ(dl.device.device_type, kDLCPU);
  EXPECT_EQ(dl.ndim, 2);
  EXPECT_EQ(dl.dtype.code, kDLFloat);
  EXPECT_EQ(dl.dtype.bits, 32);
  EXPECT_EQ(dl.dtype.lanes, 1);
  EXPECT_EQ(std::vector<int64_t>(dl.shape, dl.shape + 2), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::vector<int64_t>(dl.strides, dl.strides + 2), (std::vector<int64_t>{3, 1}));
  m->deleter(m);
}

TEST(DLPack, StridesAndOffsetOfAViewAreInElements) {
  const Tensor a = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor t(a.storage(), DType::F32, {2, 2}, {1, 3}, 1);  // columns 1..2, transposed
  DLManagedTensor* m = to_dlpack(t);
  EXPECT_EQ(std::vector<int64_t>(m->dl_tensor.strides, m->dl_tensor.strides + 2), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(*static_cast<const float*>(m->dl_tensor.data), 2.0f);
  m->deleter(m);
}

TEST(DLPack, ExportKeepsTheStorageAliveUntilTheDeleterRuns) {
  DLManagedTensor* m = nullptr;
  std::weak_ptr<Storage> storage;
  {
    const Tensor a = tensor<int64_t>({10, 20, 30});
    storage = a.storage();
    m = to_dlpack(a);
  }
  EXPECT_FALSE(storage.expired());
  EXPECT_EQ(static_cast<const int64_t*>(m->dl_tensor.data)[2], 30);
  m->deleter(m);
  EXPECT_TRUE(storage.expired());
}

TEST(DLPack, RoundTripSharesMemoryWithoutACopy) {
  Tensor a = tensor<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = from_dlpack(to_dlpack(a));
  EXPECT_EQ(b.data_ptr(), a.data_ptr());
  EXPECT_EQ(b.shape(), a.shape());
  EXPECT_EQ(b.strides(), a.strides());
  EXPECT_EQ(b.dtype(), DType::F32);
  a.data<float>()[3] = 40.0f;
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 2, 3, 40}));
}

TEST(DLPack, EveryDtypeRoundTrips) {
  for (DType dtype :
       {DType::Bool, DType::U8, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64}) {
    const Tensor a = ones({3}, dtype);
    const Tensor b = from_dlpack(to_dlpack(a));
    EXPECT_EQ(b.dtype(), dtype) << dtype;
    EXPECT_EQ(b.data_ptr(), a.data_ptr()) << dtype;
  }
  DLManagedTensor* m = to_dlpack(zeros({1}, DType::Bool));
  EXPECT_EQ(m->dl_tensor.dtype.code, 6) << "kDLBool of DLPack 0.8";
  EXPECT_EQ(m->dl_tensor.dtype.bits, 8);
  m->deleter(m);
}

TEST(DLPack, ForeignMemoryIsWrappedAndItsDeleterRunsOnceWhenTheLastViewDies) {
  int deleted = 0;
  DLManagedTensor* m = make_foreign({1, 2, 3, 4, 5, 6}, {2, 3}, {}, &deleted);
  const void* buffer = m->dl_tensor.data;
  {
    Tensor t = from_dlpack(m);
    EXPECT_EQ(t.data_ptr(), buffer);
    EXPECT_TRUE(t.is_contiguous());
    Tensor row = t.select(0, 1);
    t = Tensor();
    EXPECT_EQ(deleted, 0) << "a view still uses the memory";
    EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{4, 5, 6}));
  }
  EXPECT_EQ(deleted, 1);
}

TEST(DLPack, ForeignStridesAndByteOffsetAreHonoured) {
  int deleted = 0;
  // A column-major 2x3 matrix [[1, 2, 3], [4, 5, 6]], starting one float into the buffer.
  DLManagedTensor* m = make_foreign({-1, 1, 4, 2, 5, 3, 6}, {2, 3}, {1, 2}, &deleted);
  m->dl_tensor.byte_offset = sizeof(float);
  const Tensor t = from_dlpack(m);
  EXPECT_EQ(t.strides(), (Strides{1, 2}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(DLPack, UnsupportedDtypesAreRejectedAndTheCallerKeepsOwnership) {
  int deleted = 0;
  DLManagedTensor* m = make_foreign({1, 2}, {2}, {}, &deleted);
  for (DLDataType t : {DLDataType{kDLComplex, 64, 1}, DLDataType{kDLFloat, 32, 4}, DLDataType{kDLInt, 16, 1},
                       DLDataType{kDLUInt, 64, 1}, DLDataType{kDLOpaqueHandle, 64, 1}}) {
    m->dl_tensor.dtype = t;
    EXPECT_THROW(from_dlpack(m), DTypeError);
  }
  m->dl_tensor.dtype = {kDLInt, 16, 1};
  try {
    from_dlpack(m);
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("int16"), std::string::npos) << e.what();
  }
  EXPECT_EQ(deleted, 0) << "a failed import must not consume the tensor";
  m->deleter(m);
  EXPECT_EQ(deleted, 1);
}

// Expects `from_dlpack(m)` to throw E with `says` in its message, leaving `m` to the caller.
template <typename E>
void expect_refused(DLManagedTensor* m, const std::string& says) {
  try {
    from_dlpack(m);
    ADD_FAILURE() << "no error; expected one saying: " << says;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(DLPack, UnsupportedDevicesAndLayoutsAreRejected) {
  int deleted = 0;
  DLManagedTensor* m = make_foreign({1, 2}, {2}, {}, &deleted);
  m->dl_tensor.device = {kDLOpenCL, 0};
  try {
    from_dlpack(m);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("device type 4"), std::string::npos) << e.what();
  }
  if (!cuda::is_available()) {
    m->dl_tensor.device = {kDLCUDA, 0};
    EXPECT_THROW(from_dlpack(m), DeviceUnavailableError);
  }
  if (device_count(DeviceType::HIP) == 0) {  // ROCm memory is a hip device's, which this machine lacks
    m->dl_tensor.device = {kDLROCM, 0};
    expect_refused<DeviceUnavailableError>(m, "unavailable: " + unavailable_reason(DeviceType::HIP));
  }
  m->dl_tensor.device = {kDLCPU, 0};
  int64_t negative = -1;
  m->dl_tensor.strides = &negative;
  EXPECT_THROW(from_dlpack(m), InvalidArgumentError);
  EXPECT_THROW(from_dlpack(nullptr), InvalidArgumentError);
  EXPECT_EQ(deleted, 0);
  m->deleter(m);
}

TEST(DLPack, DescriptionsThatWouldReachBadMemoryAreRejected) {
  int deleted = 0;
  DLManagedTensor* m = make_foreign({1, 2, 3, 4}, {4}, {}, &deleted);
  DLTensor& dl = m->dl_tensor;
  void* const data = dl.data;
  // Device types from DLPack versions newer than the header we build against.
  const int32_t hexagon = 16;
  std::memcpy(&dl.device.device_type, &hexagon, sizeof(hexagon));
  expect_refused<InvalidArgumentError>(m, "device type 16");
  dl.device = {kDLCUDA, -3};
  expect_refused<InvalidArgumentError>(m, "CUDA device id -3 is negative");
  dl.device = {kDLROCM, -1};
  expect_refused<InvalidArgumentError>(m, "ROCm device id -1 is negative");
  dl.device = {kDLCPU, 0};

  dl.data = nullptr;
  expect_refused<InvalidArgumentError>(m, "data is null");
  dl.data = data;
  dl.byte_offset = 1;
  expect_refused<InvalidArgumentError>(m, "not aligned to the 4 bytes");
  dl.byte_offset = 0;

  // Shapes and strides whose offsets or byte counts do not fit in 64 bits.
  std::vector<int64_t> shape = {0, int64_t{1} << 62, 4};
  dl.shape = shape.data();
  dl.ndim = 3;
  expect_refused<ShapeError>(m, "too large");
  shape = {2};
  dl.ndim = 1;
  int64_t stride = std::numeric_limits<int64_t>::max();
  dl.strides = &stride;
  expect_refused<InvalidArgumentError>(m, "reaches further than 64-bit offsets");
  stride = int64_t{1} << 62;
  expect_refused<InvalidArgumentError>(m, "spans more bytes than fit in 64 bits");
  EXPECT_EQ(deleted, 0) << "a failed import must not consume the tensor";

  // A tensor without elements needs no data.
  dl.data = nullptr;
  dl.strides = nullptr;
  shape = {0};
  const Tensor none = from_dlpack(m);
  EXPECT_EQ(none.numel(), 0);
}

// Found by fuzz/dlpack_fuzz.cpp: float32 of shape [2] with byte_offset 2^64 - 4 (its input
// 02 20 01 00 01 00 00 00 00 00 00 00 01 00 00 fc ff ff ff ff ff ff ff 02 00 00 00 00 00 00 00). data + byte_offset
// wrapped around to 4 bytes before the buffer, which UBSan reported as a pointer overflow, and the tensor was taken.
TEST(DLPack, ByteOffsetsThatWrapAroundTheAddressSpaceAreRejected) {
  int deleted = 0;
  DLManagedTensor* m = make_foreign({1, 2, 3, 4}, {2}, {}, &deleted);
  DLTensor& dl = m->dl_tensor;
  dl.byte_offset = ~uint64_t{0} - 3;
  expect_refused<InvalidArgumentError>(m, "wrap around the address space");
  // The first element's address fits (the last 4 bytes of the address space), but the second does not.
  dl.byte_offset = ~reinterpret_cast<std::uintptr_t>(dl.data) - 3;
  expect_refused<InvalidArgumentError>(m, "and the 8 bytes after it wrap around the address space");
  EXPECT_EQ(deleted, 0) << "a failed import must not consume the tensor";
  m->deleter(m);
}

class DLPackDevices : public ::testing::TestWithParam<Device> {};

TEST_P(DLPackDevices, DeviceRoundTrip) {
  const Tensor a = tensor<float>({1, 2, 3}, {}, GetParam());
  DLManagedTensor* m = to_dlpack(a);
  EXPECT_EQ(m->dl_tensor.device.device_type, GetParam().is_cpu() ? kDLCPU : kDLCUDA);
  if (GetParam().is_cuda()) {
    EXPECT_EQ(m->dl_tensor.device.device_id, a.device().index());
  }
  const Tensor b = from_dlpack(m);
  EXPECT_EQ(b.device(), a.device());
  EXPECT_EQ(b.data_ptr(), a.data_ptr());
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

INSTANTIATE_TEST_SUITE_P(Devices, DLPackDevices, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
