// Tensor::record_stream and the non-blocking copy that records its own stream (Note [Memory used on other streams]).
// The allocator's bookkeeping is decided without a GPU in tests/runtime/allocator_streams_test.cpp; the GPU cases
// here show that the real path keeps memory that queued work still reads.
#include <gtest/gtest.h>

#include <vector>

#include "strata/core/error.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

const Device kGpu0(DeviceType::CUDA, 0);
constexpr int64_t kElements = int64_t{1} << 20;

TEST(RecordStream, UndefinedTensorIsAnError) {
  EXPECT_THROW(Tensor().record_stream(Stream::default_stream(kCPU)), InvalidArgumentError);
}

// CPU work has finished when the call that queued it returns, so the block waits only until the allocator next looks.
TEST(RecordStream, CpuTensorUsedOnASideStreamIsFreeAtTheAllocatorsNextLook) {
  const Stream side = Stream::create(kCPU);
  Tensor t = empty({1024});
  t.record_stream(side);
  const MemoryStats before = memory_stats(kCPU);
  t = Tensor();
  const MemoryStats freed = memory_stats(kCPU);
  EXPECT_EQ(freed.allocated_blocks.current, before.allocated_blocks.current - 1);
  EXPECT_EQ(freed.active_blocks.current, before.active_blocks.current);  // waits for the side stream's event
  empty_cache(kCPU);
  EXPECT_EQ(memory_stats(kCPU).active_blocks.current, before.active_blocks.current - 1);
}

// Queues a few hundred GFLOP on the current stream, so that whatever is queued next waits behind them.
void keep_current_stream_busy() {
  const Tensor a = full({4096, 4096}, 1e-3f, kGpu0);
  Tensor x = a;
  for (int i = 0; i < 8; ++i) x = matmul(x, a);
}

TEST(RecordStreamOnGpu, PinnedSourceOfANonBlockingCopyIsNotReusedBeforeTheCopyRuns) {
  STRATA_SKIP_WITHOUT_CUDA();
  const Stream side = Stream::create(kGpu0);
  StreamGuard guard(side);
  keep_current_stream_busy();
  Tensor host = full({kElements}, 1.0f, TensorOptions().pinned());
  const void* source = host.data_ptr();
  const Tensor copy = host.to(kGpu0, /*non_blocking=*/true);
  host = Tensor();  // the copy has not run yet
  Tensor next = empty({kElements}, TensorOptions().pinned());
  const bool copy_was_still_queued = !side.query();
  next.fill_(2.0f);  // would change what the copy reads, were it the same memory
  if (copy_was_still_queued) {
    EXPECT_NE(next.data_ptr(), source);
  }
  EXPECT_EQ(copy.to_vector<float>(), std::vector<float>(kElements, 1.0f));
}

TEST(RecordStreamOnGpu, DeviceMemoryReadOnASideStreamIsNotReusedBeforeThatStreamRuns) {
  STRATA_SKIP_WITHOUT_CUDA();
  Tensor input = full({kElements}, 1.0f, kGpu0);  // on the default stream
  synchronize(kGpu0);
  const Stream side = Stream::create(kGpu0);
  Tensor doubled;
  {
    StreamGuard guard(side);
    keep_current_stream_busy();
    doubled = input * 2.0f;
    input.record_stream(side);
  }
  const void* freed = input.data_ptr();
  input = Tensor();
  const Tensor next = full({kElements}, 5.0f, kGpu0);  // the default stream does not wait for the side stream
  const bool read_was_still_queued = !side.query();
  if (read_was_still_queued) {
    EXPECT_NE(next.data_ptr(), freed);
  }
  side.synchronize();
  EXPECT_EQ(doubled.to_vector<float>(), std::vector<float>(kElements, 2.0f));
}

}  // namespace
}  // namespace strata
