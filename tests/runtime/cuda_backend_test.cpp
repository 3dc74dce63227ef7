// The CUDA backend plugin (libstrata_cuda) as seen through libstrata. Built everywhere as plain C++: on a machine
// without a GPU the tests that need one skip with the reason, the others check that the absence is reported well.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/plugin.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/stream.h"
#include "strata/runtime/transfer.h"
#include "runtime/plugin_entry.h"
#include "test_devices.h"

namespace strata {
namespace {

#define STRATA_REQUIRE_CUDA() STRATA_SKIP_WITHOUT_CUDA()

const Device kGpu0("cuda:0");

// Whether the NVIDIA kernel driver shows a GPU to this process, independently of Strata.
bool machine_has_nvidia_gpu() {
  std::error_code ec;
  return std::filesystem::exists("/dev/nvidia0", ec) || !std::filesystem::is_empty("/proc/driver/nvidia/gpus", ec);
}

// Device memory from the backend, freed at scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer(Device device, std::size_t bytes)
      : backend_(backend(device)), index_(device.index()), bytes_(bytes), ptr_(backend_.raw_allocate(index_, bytes)) {
    if (ptr_ == nullptr) throw std::runtime_error("test setup: the GPU is out of memory");
  }
  ~DeviceBuffer() { backend_.raw_free(index_, ptr_, bytes_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  Backend& backend_;
  int index_;
  std::size_t bytes_;
  void* ptr_;
};

struct PinnedDeleter {
  void operator()(void* p) const { backend(DeviceType::CUDA).free_pinned(p); }
};
using PinnedBuffer = std::unique_ptr<void, PinnedDeleter>;

PinnedBuffer pinned_buffer(std::size_t bytes) { return PinnedBuffer(backend(DeviceType::CUDA).allocate_pinned(bytes)); }

std::vector<std::uint8_t> pattern(std::size_t bytes, std::uint8_t seed) {
  std::vector<std::uint8_t> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::uint8_t>(i * 31 + seed);
  return v;
}

TEST(CudaAvailability, ReasonIsGivenExactlyWhenNoGpuIsUsable) {
  const std::string reason = cuda::unavailable_reason();
  EXPECT_EQ(cuda::is_available(), reason.empty()) << reason;
  EXPECT_EQ(reason.find('\n'), std::string::npos) << "the reason must be one line: " << reason;
  if (!machine_has_nvidia_gpu()) {
    EXPECT_FALSE(cuda::is_available());
    EXPECT_FALSE(reason.empty());
  }
  if (!cuda::is_available()) {
    EXPECT_EQ(cuda::device_count(), 0);
    try {
      backend(DeviceType::CUDA);
      ADD_FAILURE() << "backend(CUDA) did not throw although CUDA is unavailable";
    } catch (const DeviceUnavailableError& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
}

TEST(CudaPlugin, EntryPointCreatesABackendOrSaysWhyNot) {
  const auto path = testing::find_plugin(DeviceType::CUDA);
  if (path.empty()) GTEST_SKIP() << "CUDA unavailable: this build has no CUDA plugin: " << cuda::unavailable_reason();
  const auto [created, why_not] = testing::call_entry_point(path);
  if (created == nullptr) {
    EXPECT_FALSE(why_not.empty());
    EXPECT_EQ(why_not.find('\n'), std::string::npos) << why_not;
    EXPECT_FALSE(machine_has_nvidia_gpu() && cuda::is_available()) << "the plugin declined: " << why_not;
  } else {
    EXPECT_TRUE(why_not.empty()) << why_not;
    EXPECT_EQ(created->type(), DeviceType::CUDA);
    EXPECT_GE(created->device_count(), 1);
  }
}

TEST(CudaAvailability, AbsentDeviceThrowsNamingIt) {
  const auto expect_names_cuda_99 = [](auto&& call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << " did not throw";
    } catch (const DeviceUnavailableError& e) {
      EXPECT_NE(std::string(e.what()).find("cuda:99"), std::string::npos) << what << ": " << e.what();
    }
  };
  expect_names_cuda_99([] { cuda::device_name(99); }, "device_name(99)");
  expect_names_cuda_99([] { cuda::set_device(99); }, "set_device(99)");
  expect_names_cuda_99([] { Stream::create(Device("cuda:99")); }, "Stream::create(cuda:99)");
  expect_names_cuda_99([] { Event event(Device("cuda:99")); }, "Event(cuda:99)");
  expect_names_cuda_99([] { check_device(Device("cuda:99")); }, "check_device(cuda:99)");
  if (cuda::is_available()) {
    const int before = cuda::current_device();
    expect_names_cuda_99([] { cuda::DeviceGuard guard(99); }, "DeviceGuard(99)");
    EXPECT_EQ(cuda::current_device(), before);
    expect_names_cuda_99([] { backend(DeviceType::CUDA).raw_allocate(99, 16); }, "raw_allocate(99)");
  }
}

TEST(Cuda, CountsAndNamesDevices) {
  STRATA_REQUIRE_CUDA();
  ASSERT_GE(cuda::device_count(), 1);
  EXPECT_EQ(cuda::device_count(), device_count(DeviceType::CUDA));
  for (int i = 0; i < cuda::device_count(); ++i) {
    const std::string name = cuda::device_name(i);
    EXPECT_FALSE(name.empty());
    EXPECT_EQ(name, backend(DeviceType::CUDA).properties(i).name);
  }
}

TEST(Cuda, PropertiesAreSane) {
  STRATA_REQUIRE_CUDA();
  for (int i = 0; i < cuda::device_count(); ++i) {
    const DeviceProperties p = backend(DeviceType::CUDA).properties(i);
    EXPECT_GE(p.compute_capability_major, 8) << p.name << " (Strata targets sm_80 and newer)";
    EXPECT_GE(p.compute_capability_minor, 0);
    EXPECT_GT(p.total_memory, std::size_t{1} << 30) << p.name;
    EXPECT_GT(p.multiprocessor_count, 0);
    EXPECT_GE(p.runtime_version, 12000);
    EXPECT_GE(p.driver_version, 12000);
  }
}

TEST(Cuda, MemoryInfoSeesAnAllocation) {
  STRATA_REQUIRE_CUDA();
  Backend& b = backend(DeviceType::CUDA);
  const MemoryInfo before = b.memory_info(0);
  EXPECT_EQ(before.total, b.properties(0).total_memory);
  EXPECT_GT(before.free, 0u);
  EXPECT_LE(before.free, before.total);
  // A quarter of what is free, so that other processes (ctest -j) starting or ending meanwhile cannot hide it.
  const std::size_t bytes = before.free / 4;
  DeviceBuffer buffer(kGpu0, bytes);
  const MemoryInfo during = b.memory_info(0);
  EXPECT_LE(during.free + bytes / 2, before.free) << "free memory did not drop after allocating " << bytes;
}

TEST(Cuda, RawAllocateReturnsNullWhenTheDeviceIsFullAndRecovers) {
  STRATA_REQUIRE_CUDA();
  Backend& b = backend(DeviceType::CUDA);
  const std::size_t too_much = b.properties(0).total_memory * 2;
  EXPECT_EQ(b.raw_allocate(0, too_much), nullptr);
  // The failure was cleared: the next allocation and a synchronisation work.
  DeviceBuffer small(kGpu0, 4096);
  EXPECT_NE(small.get(), nullptr);
  EXPECT_NO_THROW(synchronize(kGpu0));
}

TEST(Cuda, HostDeviceRoundTripIsCounted) {
  STRATA_REQUIRE_CUDA();
  constexpr std::size_t kBytes = (std::size_t{1} << 20) + 3;
  const auto host = pattern(kBytes, 7);
  std::vector<std::uint8_t> back(kBytes, 0);
  DeviceBuffer device(kGpu0, kBytes);
  reset_transfer_counters();
  copy_bytes(device.get(), Device("cuda"), host.data(), kCPU, kBytes, nullptr, /*blocking=*/true);
  copy_bytes(back.data(), kCPU, device.get(), kGpu0, kBytes, nullptr, /*blocking=*/true);
  EXPECT_EQ(back, host);
  const TransferCounters c = transfer_counters();
  EXPECT_EQ(c.host_to_device_copies, 1);
  EXPECT_EQ(c.host_to_device_bytes, static_cast<int64_t>(kBytes));
  EXPECT_EQ(c.device_to_host_copies, 1);
  EXPECT_EQ(c.device_to_host_bytes, static_cast<int64_t>(kBytes));
  EXPECT_EQ(c.device_to_device_copies, 0);
  EXPECT_EQ(c.synchronizations, 2);
}

TEST(Cuda, DeviceToDeviceCopiesAreCounted) {
  STRATA_REQUIRE_CUDA();
  constexpr std::size_t kBytes = 64 << 10;
  const auto host = pattern(kBytes, 3);
  std::vector<std::uint8_t> back(kBytes, 0);
  DeviceBuffer a(kGpu0, kBytes);
  DeviceBuffer b(kGpu0, kBytes);
  copy_bytes(a.get(), kGpu0, host.data(), kCPU, kBytes, nullptr, true);
  reset_transfer_counters();
  copy_bytes(b.get(), kGpu0, a.get(), kGpu0, kBytes, nullptr, true);
  int64_t expected_copies = 1;
  if (cuda::device_count() >= 2) {  // a peer copy there and back as well
    const Device gpu1("cuda:1");
    DeviceBuffer remote(gpu1, kBytes);
    copy_bytes(remote.get(), gpu1, b.get(), kGpu0, kBytes, nullptr, true);
    copy_bytes(b.get(), kGpu0, remote.get(), gpu1, kBytes, nullptr, true);
    expected_copies += 2;
  }
  const TransferCounters c = transfer_counters();
  EXPECT_EQ(c.device_to_device_copies, expected_copies);
  EXPECT_EQ(c.device_to_device_bytes, expected_copies * static_cast<int64_t>(kBytes));
  EXPECT_EQ(c.host_to_device_copies + c.device_to_host_copies, 0);
  copy_bytes(back.data(), kCPU, b.get(), kGpu0, kBytes, nullptr, true);
  EXPECT_EQ(back, host);
}

TEST(Cuda, NonBlockingCopyFromPinnedMemoryCompletesOnStreamSynchronize) {
  STRATA_REQUIRE_CUDA();
  constexpr std::size_t kBytes = std::size_t{8} << 20;
  const auto expected = pattern(kBytes, 11);
  PinnedBuffer source = pinned_buffer(kBytes);
  PinnedBuffer target = pinned_buffer(kBytes);
  ASSERT_NE(source.get(), nullptr);
  std::memcpy(source.get(), expected.data(), kBytes);
  std::memset(target.get(), 0, kBytes);
  DeviceBuffer device(kGpu0, kBytes);
  const Stream stream = Stream::create(kGpu0);
  EXPECT_FALSE(stream.is_default());
  reset_transfer_counters();
  copy_bytes(device.get(), kGpu0, source.get(), kCPU, kBytes, stream.native(), /*blocking=*/false);
  copy_bytes(target.get(), kCPU, device.get(), kGpu0, kBytes, stream.native(), /*blocking=*/false);
  EXPECT_EQ(transfer_counters().synchronizations, 0);
  stream.synchronize();
  EXPECT_TRUE(stream.query());
  EXPECT_EQ(transfer_counters().synchronizations, 1);
  EXPECT_EQ(std::memcmp(target.get(), expected.data(), kBytes), 0);
}

TEST(Cuda, EventsOrderTwoStreamsAndTimeWork) {
  STRATA_REQUIRE_CUDA();
  // The writer stream is kept busy (copies into a scratch buffer) before it writes the pattern, so a reader
  // that did not wait for the event would read the old zeros.
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  const auto expected = pattern(kBytes, 5);
  PinnedBuffer source = pinned_buffer(kBytes);
  PinnedBuffer target = pinned_buffer(kBytes);
  std::memcpy(source.get(), expected.data(), kBytes);
  DeviceBuffer device(kGpu0, kBytes);
  DeviceBuffer scratch(kGpu0, kBytes);
  const std::vector<std::uint8_t> zeros(kBytes, 0);
  copy_bytes(device.get(), kGpu0, zeros.data(), kCPU, kBytes, nullptr, true);

  const Stream writer = Stream::create(kGpu0);
  const Stream reader = Stream::create(kGpu0);
  Event start(kGpu0);
  Event written(kGpu0);
  start.record(writer);
  for (int i = 0; i < 8; ++i) copy_bytes(scratch.get(), kGpu0, source.get(), kCPU, kBytes, writer.native(), false);
  copy_bytes(device.get(), kGpu0, source.get(), kCPU, kBytes, writer.native(), false);
  written.record(writer);
  reader.wait(written);
  copy_bytes(target.get(), kCPU, device.get(), kGpu0, kBytes, reader.native(), false);
  reader.synchronize();
  EXPECT_EQ(std::memcmp(target.get(), expected.data(), kBytes), 0) << "the reader stream did not wait";
  written.synchronize();
  EXPECT_TRUE(written.query());
  EXPECT_TRUE(writer.query());
  const float ms = written.elapsed_ms_since(start);
  EXPECT_GT(ms, 0.0f) << "copying 9 x 64 MiB took no time";
  EXPECT_LT(ms, 10'000.0f);
}

TEST(Cuda, DefaultStreamIsNullAndUsable) {
  STRATA_REQUIRE_CUDA();
  const Stream s = Stream::default_stream(Device("cuda"));
  EXPECT_TRUE(s.is_default());
  EXPECT_EQ(s.device(), Device(DeviceType::CUDA, cuda::current_device()));
  EXPECT_EQ(current_stream(kGpu0), Stream::default_stream(kGpu0));
  Event e(kGpu0);
  e.record(s);
  s.synchronize();
  EXPECT_TRUE(s.query());
  EXPECT_TRUE(e.query());
  EXPECT_NO_THROW(synchronize(kGpu0));
}

TEST(Cuda, DeviceGuardRestoresTheCurrentDevice) {
  STRATA_REQUIRE_CUDA();
  const int count = cuda::device_count();
  const int original = cuda::current_device();
  for (int i = 0; i < count; ++i) {
    {
      cuda::DeviceGuard guard(i);
      EXPECT_EQ(cuda::current_device(), i);
      // Per-device backend calls select their device themselves and leave the current one alone.
      backend(DeviceType::CUDA).memory_info(count - 1 - i);
      EXPECT_EQ(cuda::current_device(), i);
    }
    EXPECT_EQ(cuda::current_device(), original);
  }
  cuda::set_device(count - 1);
  EXPECT_EQ(cuda::current_device(), count - 1);
  cuda::set_device(original);
}

TEST(Cuda, CanAccessItsOwnMemory) {
  STRATA_REQUIRE_CUDA();
  Backend& b = backend(DeviceType::CUDA);
  for (int i = 0; i < cuda::device_count(); ++i) EXPECT_TRUE(b.can_access_peer(i, i));
  EXPECT_THROW(b.can_access_peer(0, 99), DeviceUnavailableError);
}

}  // namespace
}  // namespace strata
