// Device memory that cuBLAS and cuDNN use (Note [Memory that CUDA libraries allocate themselves]): the retry policy
// with a test resource standing in for the device, and on a GPU, cuBLAS's workspace drawn from the caching allocator.
#include "strata/backends/cuda/library_memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "runtime/test_memory_resource.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

using ::testing::HasSubstr;
using testing::TestAllocator;
using testing::TestMemoryResource;

constexpr std::size_t kMiB = std::size_t{1} << 20;

enum class Status { Ok, AllocFailed, OtherFailure };

// A library call that takes `bytes` of device memory itself, outside the caching allocator, as cudnnCreate does.
struct AllocatingCall {
  TestMemoryResource* device;
  std::size_t bytes;
  int calls = 0;
  Status operator()() {
    ++calls;
    return device->allocate(bytes) != nullptr ? Status::Ok : Status::AllocFailed;
  }
};

bool failed_to_allocate(Status status) { return status == Status::AllocFailed; }

int64_t reserved(const TestAllocator& t) { return t.allocator.stats().reserved_bytes.current; }

TEST(LibraryMemory, ACallShortOfMemoryRunsAgainWithTheCacheEmptied) {
  TestAllocator t(64 * kMiB);
  t.allocator.allocate(60 * kMiB).reset();  // cached: free for Strata, but not for a library's cudaMalloc
  AllocatingCall call{t.resource, 8 * kMiB};
  const Status status = cuda::retry_after_emptying_cache(call, failed_to_allocate, [&] { t.allocator.empty_cache(); });
  EXPECT_EQ(status, Status::Ok);
  EXPECT_EQ(call.calls, 2);
  EXPECT_EQ(reserved(t), 0);
}

TEST(LibraryMemory, ACallThatSucceedsLeavesTheCacheAlone) {
  TestAllocator t(64 * kMiB);
  t.allocator.allocate(40 * kMiB).reset();
  AllocatingCall call{t.resource, 8 * kMiB};
  EXPECT_EQ(cuda::retry_after_emptying_cache(call, failed_to_allocate, [&] { t.allocator.empty_cache(); }), Status::Ok);
  EXPECT_EQ(call.calls, 1);
  EXPECT_EQ(reserved(t), static_cast<int64_t>(40 * kMiB));
}

TEST(LibraryMemory, OtherFailuresAreNotRetried) {
  TestAllocator t(64 * kMiB);
  t.allocator.allocate(40 * kMiB).reset();
  int calls = 0;
  int emptied = 0;
  const Status status = cuda::retry_after_emptying_cache(
      [&] {
        ++calls;
        return Status::OtherFailure;
      },
      failed_to_allocate, [&] { ++emptied; });
  EXPECT_EQ(status, Status::OtherFailure);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(emptied, 0);
}

TEST(LibraryMemory, AShortageThatPersistsIsTriedTwiceAndReturned) {
  TestAllocator t(64 * kMiB);
  const DataPtr held = t.allocator.allocate(60 * kMiB);  // in use: emptying the cache frees nothing
  AllocatingCall call{t.resource, 8 * kMiB};
  int emptied = 0;
  const Status status = cuda::retry_after_emptying_cache(call, failed_to_allocate, [&] {
    ++emptied;
    t.allocator.empty_cache();
  });
  EXPECT_EQ(status, Status::AllocFailed);
  EXPECT_EQ(call.calls, 2);
  EXPECT_EQ(emptied, 1);
}

TEST(LibraryMemory, OutOfMemoryErrorNamesTheOpTheLibraryAndTheCall) {
  try {
    cuda::throw_library_out_of_memory("conv2d", "cuDNN", "cudnnCreate(&h)",
                                      "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED", Device("cuda:1"));
    FAIL() << "no error";
  } catch (const OutOfMemoryError& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, HasSubstr("conv2d: cuDNN could not allocate memory on cuda:1 for cudnnCreate(&h)"));
    EXPECT_THAT(message, HasSubstr("CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"));
    EXPECT_THAT(message, HasSubstr("reduce the batch size"));
  }
}

// Note [cuBLAS workspaces] in backends/cuda/matmul.cpp: each thread's handle holds one workspace from the caching
// allocator, on the stream it last ran on, until the thread ends.
TEST(LibraryMemoryOnCuda, CublasWorkspaceComesFromTheCachingAllocatorAndGoesWithTheThread) {
  STRATA_SKIP_WITHOUT_CUDA();
  const Device gpu(DeviceType::CUDA, 0);
  const Tensor a = ones({64, 64}, TensorOptions().device(gpu));
  const Tensor b = ones({64, 64}, TensorOptions().device(gpu));
  synchronize(gpu);
  const auto allocated = [gpu] { return memory_stats(gpu).allocated_bytes.current; };
  const int64_t before = allocated();
  int64_t first = 0, second = 0, other_stream = 0;
  std::thread worker([&] {  // a new thread: a new cuBLAS handle
    EXPECT_EQ(matmul(a, b).to_vector<float>(), std::vector<float>(64 * 64, 64.0f));
    first = allocated();
    EXPECT_EQ(matmul(a, b).to_vector<float>(), std::vector<float>(64 * 64, 64.0f));
    second = allocated();
    const StreamGuard on_side_stream(Stream::create(gpu));
    EXPECT_EQ(matmul(a, b).to_vector<float>(), std::vector<float>(64 * 64, 64.0f));
    other_stream = allocated();
  });
  worker.join();
  EXPECT_GE(first - before, static_cast<int64_t>(8 * kMiB)) << "no workspace was taken from the caching allocator";
  EXPECT_EQ(second, first) << "a second GEMM on the same stream took another workspace";
  EXPECT_EQ(other_stream, first) << "moving to another stream kept the old workspace as well as the new one";
  EXPECT_EQ(allocated(), before) << "the workspace outlived its thread's handle";
}

}  // namespace
}  // namespace strata
