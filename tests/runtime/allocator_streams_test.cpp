// Blocks used on streams other than their own (Note [Memory used on other streams]): on a test resource whose
// events the test completes, so that every case is decided without a GPU. Also the pinned resource's contract.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <new>

#include "runtime/test_memory_resource.h"
#include "strata/core/error.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/registry.h"

namespace strata {
namespace {

using testing::stream_a;
using testing::stream_b;
using testing::TestAllocator;
using testing::TestMemoryResource;

constexpr std::size_t kKiB = std::size_t{1} << 10;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;
const Device kGpu(DeviceType::CUDA, 0);

// Events whose completion the test decides: a recorded event stays pending until finish() says its stream got
// there, or until the allocator synchronizes with it.
class FakeStreamEvents final : public StreamEvents {
 public:
  NativeEvent create(Device device) override {
    ++created;
    NativeEvent event = reinterpret_cast<NativeEvent>(next_id_++);  // NOLINT: made-up handles
    events_[event] = {device, nullptr, true};
    return event;
  }
  void destroy(Device, NativeEvent event) noexcept override {
    ++destroyed;
    events_.erase(event);
  }
  void record(Device device, NativeEvent event, NativeStream stream) override {
    if (fail_records) STRATA_THROW(BackendError, "record_event failed (test)");
    Recorded& recorded = events_.at(event);  // throws for an event that was destroyed or never made
    EXPECT_EQ(recorded.device, device) << "an event is recorded on the device it was made for";
    recorded = {device, stream, false};
    ++records;
  }
  bool query(Device, NativeEvent event) override { return events_.at(event).done; }
  void synchronize(Device, NativeEvent event) override {
    ++synchronizations;
    events_.at(event).done = true;
  }

  /// The work queued so far on `stream` (of any device) has finished.
  void finish(NativeStream stream) {
    for (auto& [event, recorded] : events_) {
      if (recorded.stream == stream) recorded.done = true;
    }
  }

  int created = 0;
  int destroyed = 0;
  int records = 0;
  int synchronizations = 0;
  bool fail_records = false;

 private:
  struct Recorded {
    Device device;
    NativeStream stream;
    bool done;
  };
  std::uintptr_t next_id_ = 0x10;
  std::map<NativeEvent, Recorded> events_;
};

std::unique_ptr<TestMemoryResource> resource_with(FakeStreamEvents* events, std::size_t capacity, Device device) {
  auto resource = std::make_unique<TestMemoryResource>(capacity, device);
  resource->set_stream_events(events);
  return resource;
}

// A caching allocator whose resource has the fake events (made first, so that they outlive the allocator).
struct EventfulAllocator {
  explicit EventfulAllocator(std::size_t capacity = kGiB, Device device = kGpu)
      : t(resource_with(&events, capacity, device)) {}
  FakeStreamEvents events;
  TestAllocator t;
};

TEST(StreamUses, BlockUsedOnAnotherStreamWaitsForItsEventBeforeReuse) {
  EventfulAllocator e;
  DataPtr p = e.t.allocator.allocate(4 * kKiB, stream_a());
  void* first = p.get();
  p.record_stream(kGpu, stream_b());
  p.reset();
  DataPtr while_pending = e.t.allocator.allocate(4 * kKiB, stream_a());
  EXPECT_NE(while_pending.get(), first);
  e.events.finish(stream_b());
  DataPtr after = e.t.allocator.allocate(4 * kKiB, stream_a());
  EXPECT_EQ(after.get(), first);
  EXPECT_EQ(e.events.records, 1);
}

TEST(StreamUses, RecordingTheAllocationStreamChangesNothing) {
  EventfulAllocator e;
  DataPtr p = e.t.allocator.allocate(4 * kKiB, stream_a());
  void* first = p.get();
  p.record_stream(kGpu, stream_a());
  p.reset();
  EXPECT_EQ(e.t.allocator.stats().active_blocks.current, 0);
  EXPECT_EQ(e.t.allocator.allocate(4 * kKiB, stream_a()).get(), first);
  EXPECT_EQ(e.events.created, 0);
  EXPECT_EQ(e.events.records, 0);
}

// The pinned allocator's case: host memory allocated for the CPU's default stream, copied by a GPU's default stream.
// Both streams are the null handle; the device tells them apart.
TEST(StreamUses, HostBlockUsedByAGpuStreamWaitsForIt) {
  EventfulAllocator e(kGiB, kCPU);
  DataPtr p = e.t.allocator.allocate(4 * kKiB);
  void* first = p.get();
  p.record_stream(kGpu, nullptr);
  p.reset();
  DataPtr while_pending = e.t.allocator.allocate(4 * kKiB);
  EXPECT_NE(while_pending.get(), first);
  e.events.finish(nullptr);
  EXPECT_EQ(e.t.allocator.allocate(4 * kKiB).get(), first);
  EXPECT_EQ(e.events.created, 1);
}

TEST(StreamUses, EachStreamIsRecordedOnceAndAllMustFinish) {
  EventfulAllocator e;
  DataPtr p = e.t.allocator.allocate(4 * kKiB, stream_a());
  void* first = p.get();
  for (int i = 0; i < 3; ++i) p.record_stream(kGpu, stream_b());
  p.record_stream(kGpu, nullptr);
  p.reset();
  EXPECT_EQ(e.events.created, 2);
  EXPECT_EQ(e.events.records, 2);
  e.events.finish(stream_b());
  DataPtr while_pending = e.t.allocator.allocate(4 * kKiB, stream_a());
  EXPECT_NE(while_pending.get(), first);  // the default stream may still use it
  e.events.finish(nullptr);
  EXPECT_EQ(e.t.allocator.allocate(4 * kKiB, stream_a()).get(), first);
}

TEST(StreamUses, WaitingBlockIsReservedAndActiveButNotAllocated) {
  EventfulAllocator e;
  DataPtr p = e.t.allocator.allocate(4 * kKiB, stream_a());
  p.record_stream(kGpu, stream_b());
  p.reset();
  MemoryStats s = e.t.allocator.stats();
  EXPECT_EQ(s.allocated_blocks.current, 0);
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.requested_bytes, 0);
  EXPECT_EQ(s.active_blocks.current, 1);
  EXPECT_EQ(s.active_bytes.current, static_cast<int64_t>(4 * kKiB));
  EXPECT_EQ(s.reserved_bytes.current, static_cast<int64_t>(2 * kMiB));
  e.events.finish(stream_b());
  e.t.allocator.empty_cache();
  s = e.t.allocator.stats();
  EXPECT_EQ(s.active_blocks.current, 0);
  EXPECT_EQ(s.active_bytes.current, 0);
  EXPECT_EQ(s.reserved_bytes.current, 0);
}

TEST(StreamUses, EmptyCacheKeepsTheSegmentUntilTheOtherStreamHasFinished) {
  EventfulAllocator e;
  DataPtr p = e.t.allocator.allocate(30 * kMiB, stream_a());
  p.record_stream(kGpu, stream_b());
  p.reset();
  e.t.allocator.empty_cache();  // does not wait
  EXPECT_EQ(e.t.allocator.stats().reserved_bytes.current, static_cast<int64_t>(30 * kMiB));
  EXPECT_EQ(e.t.resource->counters().frees, 0);
  EXPECT_EQ(e.events.synchronizations, 0);
  e.events.finish(stream_b());
  e.t.allocator.empty_cache();
  EXPECT_EQ(e.t.allocator.stats().reserved_bytes.current, 0);
  EXPECT_EQ(e.t.resource->counters().frees, 1);
}

TEST(StreamUses, AllocationThatWouldFailWaitsAndReusesTheBlock) {
  EventfulAllocator e(40 * kMiB);
  DataPtr p = e.t.allocator.allocate(30 * kMiB, stream_a());
  void* first = p.get();
  p.record_stream(kGpu, stream_b());
  p.reset();
  DataPtr again = e.t.allocator.allocate(30 * kMiB, stream_a());  // 30 + 30 > 40 unless the block is waited for
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(e.events.synchronizations, 1);
  EXPECT_EQ(e.t.allocator.stats().oom_count, 0);
  EXPECT_EQ(e.t.allocator.stats().reserved_segments.current, 1);
}

TEST(StreamUses, AllocationThatWouldFailWaitsAndReleasesTheSegmentForAnotherStream) {
  EventfulAllocator e(40 * kMiB);
  DataPtr p = e.t.allocator.allocate(30 * kMiB, stream_a());
  p.record_stream(kGpu, stream_b());
  p.reset();
  DataPtr on_b = e.t.allocator.allocate(30 * kMiB, stream_b());
  EXPECT_TRUE(on_b);
  EXPECT_EQ(e.events.synchronizations, 1);
  EXPECT_EQ(e.t.resource->counters().frees, 1);
  EXPECT_EQ(e.t.allocator.stats().reserved_bytes.current, static_cast<int64_t>(30 * kMiB));
}

TEST(StreamUses, OutOfMemoryAfterWaitingStillThrowsOutOfMemoryError) {
  EventfulAllocator e(40 * kMiB);
  DataPtr held = e.t.allocator.allocate(20 * kMiB, stream_a());
  DataPtr p = e.t.allocator.allocate(12 * kMiB, stream_b());
  p.record_stream(kGpu, stream_a());
  p.reset();
  EXPECT_THROW(e.t.allocator.allocate(30 * kMiB, stream_a()), OutOfMemoryError);
  EXPECT_EQ(e.events.synchronizations, 1);
  const MemoryStats s = e.t.allocator.stats();
  EXPECT_EQ(s.oom_count, 1);
  EXPECT_EQ(s.active_blocks.current, 1);  // the waited-for block is free now, and its segment went back
  EXPECT_EQ(s.reserved_bytes.current, static_cast<int64_t>(20 * kMiB));
}

TEST(StreamUses, EventsAreReused) {
  EventfulAllocator e;
  for (int i = 0; i < 10; ++i) {
    DataPtr p = e.t.allocator.allocate(4 * kKiB, stream_a());
    p.record_stream(kGpu, stream_b());
    p.reset();
    e.events.finish(stream_b());
  }
  EXPECT_EQ(e.events.records, 10);
  EXPECT_EQ(e.events.created, 1);
}

TEST(StreamUses, EveryEventIsDestroyedWithTheAllocator) {
  FakeStreamEvents events;
  // A block still held when its allocator goes is left to its holder, which must then never free it: this one is
  // never destroyed.
  alignas(DataPtr) unsigned char held[sizeof(DataPtr)];
  {
    TestAllocator t(resource_with(&events, kGiB, kGpu));
    DataPtr completed = t.allocator.allocate(4 * kKiB, stream_a());
    DataPtr pending = t.allocator.allocate(4 * kKiB, stream_a());
    DataPtr in_use = t.allocator.allocate(4 * kKiB, stream_a());
    for (DataPtr* p : {&completed, &pending, &in_use}) p->record_stream(kGpu, stream_b());
    completed.reset();
    events.finish(stream_b());
    pending.reset();  // recorded after the finish: still pending when the allocator goes
    (void)t.allocator.allocate(4 * kKiB, stream_a());  // takes the completed event back into the pool
    new (held) DataPtr(std::move(in_use));
    EXPECT_EQ(events.created, 3);
  }
  EXPECT_EQ(events.destroyed, 3);
}

TEST(StreamUses, BlockWhoseEventCannotBeRecordedIsNeverHandedOutAgain) {
  EventfulAllocator e;
  DataPtr p = e.t.allocator.allocate(4 * kKiB, stream_a());
  void* first = p.get();
  p.record_stream(kGpu, stream_b());
  e.events.fail_records = true;
  p.reset();  // a destructor's work: the failure is not thrown
  e.events.finish(stream_b());
  EXPECT_NE(e.t.allocator.allocate(4 * kKiB, stream_a()).get(), first);
  EXPECT_EQ(e.events.destroyed, 1);
  EXPECT_EQ(e.t.allocator.stats().active_blocks.current, 1);  // leaked, so still counted as in use
}

TEST(StreamUses, ResourceWithoutEventsIgnoresRecords) {
  TestAllocator t;
  DataPtr p = t.allocator.allocate(4 * kKiB, stream_a());
  void* first = p.get();
  p.record_stream(kGpu, stream_b());
  p.reset();
  EXPECT_EQ(t.allocator.allocate(4 * kKiB, stream_a()).get(), first);
}

TEST(StreamUses, EmptyDataPtrIgnoresRecords) {
  DataPtr empty;
  EXPECT_NO_THROW(empty.record_stream(kGpu, stream_b()));
}

TEST(StreamUses, StreamOfAnotherDeviceKindIsRefused) {
  EventfulAllocator e;
  DataPtr p = e.t.allocator.allocate(4 * kKiB, stream_a());
  EXPECT_THROW(p.record_stream(kCPU, stream_b()), DeviceMismatchError);
  EXPECT_THROW(p.record_stream(Device(DeviceType::CUDA), stream_b()), InvalidArgumentError);  // "cuda", unresolved
  EXPECT_EQ(e.events.created, 0);
}

// --- the pinned resource's contract: nullptr when out of memory, so that the allocator can retry ---

TEST(PinnedMemory, CpuBackendReturnsNullForARequestItCannotMeet) {
  Backend& cpu = backend(DeviceType::CPU);
  EXPECT_EQ(cpu.allocate_pinned(std::numeric_limits<std::size_t>::max()), nullptr);
  void* none = cpu.allocate_pinned(0);  // a real pointer: nullptr would mean out of memory
  EXPECT_NE(none, nullptr);
  cpu.free_pinned(none);
}

// The pinned allocator is a caching allocator on the CPU; a full resource makes it release its cache and retry.
TEST(PinnedMemory, FullResourceMakesTheAllocatorReleaseItsCacheAndRetry) {
  TestAllocator t(std::make_unique<TestMemoryResource>(40 * kMiB, kCPU));
  t.allocator.allocate(12 * kMiB, stream_a()).reset();
  DataPtr big = t.allocator.allocate(30 * kMiB);
  EXPECT_TRUE(big);
  EXPECT_EQ(t.allocator.stats().retries, 1);
  EXPECT_EQ(t.resource->counters().failed_allocations, 1);
  EXPECT_EQ(t.resource->counters().frees, 1);
}

}  // namespace
}  // namespace strata
