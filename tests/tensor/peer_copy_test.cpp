// Note [Copies between two GPUs] (tensor/copy.cpp), on a machine that has two.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "strata/runtime/cuda.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

// Side streams on both devices, since a legacy default stream would order the copy behind the source's kernels by
// itself. The host queues the adds faster than the device runs them, so a copy that did not wait for them would read
// a partial sum, and a kernel on the destination that did not wait for the copy would read what its memory held.
TEST(PeerCopy, WaitsForTheKernelsThatWroteTheSourceAndIsSeenByTheNextKernel) {
  STRATA_SKIP_WITHOUT_CUDA();
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two devices; this machine has " << cuda::device_count();
  const Device source(DeviceType::CUDA, 0), destination(DeviceType::CUDA, 1);
  const StreamGuard on_source(Stream::create(source));
  const StreamGuard on_destination(Stream::create(destination));
  constexpr int64_t kCount = int64_t{1} << 24;
  constexpr int kAdds = 64;
  Tensor x = zeros({kCount}, TensorOptions(DType::F32).device(source));
  for (int i = 0; i < kAdds; ++i) x = x + 1.0;
  const Tensor y = x.to(destination);
  const Tensor doubled = y * 2.0;
  ASSERT_EQ(doubled.device(), destination);
  const std::vector<float> got = doubled.to_vector<float>();
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kCount));
  int64_t wrong = 0;
  std::size_t first_wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == 2.0f * kAdds) continue;
    if (wrong++ == 0) first_wrong = i;
  }
  EXPECT_EQ(wrong, 0) << "element " << first_wrong << " is " << got[first_wrong] << ", not " << 2 * kAdds;
}

}  // namespace
}  // namespace strata
