#include "strata/runtime/stream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "strata/core/error.h"
#include "test_devices.h"

namespace strata {
namespace {

class Streams : public ::testing::TestWithParam<Device> {};

TEST_P(Streams, DefaultStreamIsCurrentUntilAGuardChangesIt) {
  const Device d = GetParam();
  EXPECT_TRUE(current_stream(d).is_default());
  const Stream s = Stream::create(d);
  EXPECT_FALSE(s.is_default());
  {
    StreamGuard guard(s);
    EXPECT_EQ(current_stream(d), s);
  }
  EXPECT_TRUE(current_stream(d).is_default());
}

TEST_P(Streams, UserStreamsAreDistinct) {
  const Stream a = Stream::create(GetParam());
  const Stream b = Stream::create(GetParam());
  EXPECT_NE(a.native(), b.native());
  const Stream a_copy = a;
  EXPECT_EQ(a_copy, a);
}

TEST_P(Streams, EventsRecordWaitAndTime) {
  const Device d = GetParam();
  const Stream s1 = Stream::create(d), s2 = Stream::create(d);
  Event start(d), end(d);
  start.record(s1);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  end.record(s1);
  s2.wait(end);
  s2.synchronize();
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_GE(end.elapsed_ms_since(start), 0.0f);
}

TEST_P(Streams, TimingUnrecordedEventsIsAnError) {
  Event a(GetParam()), b(GetParam());
  EXPECT_THROW(b.elapsed_ms_since(a), InvalidArgumentError);
}

INSTANTIATE_TEST_SUITE_P(Devices, Streams, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

TEST(Streams, CpuEventsMeasureHostTime) {
  Event start(kCPU), end(kCPU);
  start.record();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  end.record();
  EXPECT_GE(end.elapsed_ms_since(start), 4.0f);
}

}  // namespace
}  // namespace strata
