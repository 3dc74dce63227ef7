// The split of Backend into what every backend provides and optional capabilities whose defaults throw
// (Note [Required and optional backend capabilities] in runtime/backend.h).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "strata/core/error.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/stream.h"

namespace strata {
namespace {

// Only what a backend must provide: one device of type CUDA, host memory as its memory, memcpy as its copies.
class MinimalBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CUDA; }
  int device_count() const override { return 1; }
  DeviceProperties properties(int) const override { return {"minimal", 1 << 20}; }
  MemoryInfo memory_info(int) const override { return {1 << 20, 1 << 20}; }
  void* raw_allocate(int, std::size_t bytes) override { return ::operator new(bytes == 0 ? 1 : bytes); }
  void raw_free(int, void* ptr, std::size_t) override { ::operator delete(ptr); }
  void copy(void* dst, Device, const void* src, Device, std::size_t bytes, NativeStream, bool) override {
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }
  void synchronize_device(int) override {}
  int current_device() const override { return 0; }
};

// Expects `call` to throw NotImplementedError with exactly `message`.
void expect_unsupported(const std::function<void()>& call, const std::string& message) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected: " << message;
  } catch (const NotImplementedError& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(OptionalBackendCapabilities, ThrowNotImplementedErrorNamingTheBackendAndTheCapability) {
  MinimalBackend b;
  int handle = 0;
  expect_unsupported([&] { b.allocate_pinned(16); }, "cuda backend: pinned memory is not supported (allocate_pinned)");
  expect_unsupported([&] { b.create_stream(0); }, "cuda backend: streams are not supported (create_stream)");
  expect_unsupported([&] { b.synchronize_stream(0, nullptr); },
                     "cuda backend: streams are not supported (synchronize_stream)");
  expect_unsupported([&] { b.query_stream(0, nullptr); }, "cuda backend: streams are not supported (query_stream)");
  expect_unsupported([&] { b.create_event(0); }, "cuda backend: events are not supported (create_event)");
  expect_unsupported([&] { b.record_event(0, &handle, nullptr); },
                     "cuda backend: events are not supported (record_event)");
  expect_unsupported([&] { b.wait_event(0, nullptr, &handle); }, "cuda backend: events are not supported (wait_event)");
  expect_unsupported([&] { b.synchronize_event(0, &handle); },
                     "cuda backend: events are not supported (synchronize_event)");
  expect_unsupported([&] { b.query_event(0, &handle); }, "cuda backend: events are not supported (query_event)");
  expect_unsupported([&] { b.elapsed_ms(0, &handle, &handle); },
                     "cuda backend: event timing is not supported (elapsed_ms)");
  expect_unsupported([&] { b.set_current_device(0); },
                     "cuda backend: device selection is not supported (set_current_device)");
  expect_unsupported([&] { b.can_access_peer(0, 0); }, "cuda backend: peer access is not supported (can_access_peer)");
}

// Releases run in destructors; with nothing ever acquired they have nothing to do and must not throw.
TEST(OptionalBackendCapabilities, ReleasesDoNothingByDefault) {
  MinimalBackend b;
  EXPECT_NO_THROW(b.destroy_stream(0, nullptr));
  EXPECT_NO_THROW(b.destroy_event(0, nullptr));
  EXPECT_NO_THROW(b.free_pinned(nullptr));
}

// Through the runtime: a backend without streams or events still resolves and synchronises its device, and the
// calls that need a missing capability say which one. Registering replaces the process's CUDA backend, so this runs
// only where there is none.
TEST(OptionalBackendCapabilities, TheRuntimeReportsTheMissingCapability) {
  if (cuda::is_available()) GTEST_SKIP() << "the plugin's backend is loaded, and a stand-in may not replace it";
  register_backend(DeviceType::CUDA, std::make_unique<MinimalBackend>());
  struct Unregister {
    ~Unregister() { register_backend(DeviceType::CUDA, nullptr); }
  } unregister;
  EXPECT_EQ(resolve(Device("cuda")), Device(DeviceType::CUDA, 0));
  EXPECT_NO_THROW(synchronize(Device("cuda:0")));
  expect_unsupported([] { Stream::create(Device("cuda:0")); },
                     "cuda backend: streams are not supported (create_stream)");
  expect_unsupported([] { Event event(Device("cuda:0")); }, "cuda backend: events are not supported (create_event)");
}

// The CPU implements every optional capability but device selection: a CPU device always has an index.
TEST(CpuBackendCapabilities, EverythingButDeviceSelection) {
  Backend& cpu = backend(DeviceType::CPU);
  const NativeStream stream = cpu.create_stream(0);
  EXPECT_TRUE(cpu.query_stream(0, stream));
  const NativeEvent start = cpu.create_event(0);
  const NativeEvent end = cpu.create_event(0);
  cpu.record_event(0, start, stream);
  cpu.record_event(0, end, stream);
  EXPECT_GE(cpu.elapsed_ms(0, start, end), 0.0f);
  EXPECT_TRUE(cpu.query_event(0, end));
  cpu.destroy_event(0, start);
  cpu.destroy_event(0, end);
  cpu.destroy_stream(0, stream);
  void* pinned = cpu.allocate_pinned(64);
  EXPECT_NE(pinned, nullptr);
  cpu.free_pinned(pinned);
  EXPECT_TRUE(cpu.can_access_peer(0, 0));
  EXPECT_EQ(cpu.current_device(), 0);
  expect_unsupported([&] { cpu.set_current_device(0); },
                     "cpu backend: device selection is not supported (set_current_device)");
}

}  // namespace
}  // namespace strata
