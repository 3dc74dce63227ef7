// strata::profiler (Note [The profiler]): what a recording holds for ops, ranges, copies, synchronisations and the
// allocator, the Chrome trace it writes and the table of ops.
#include "strata/runtime/profiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "runtime/test_memory_resource.h"
#include "strata/core/error.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/transfer.h"
#include "strata/strata.h"
#include "test_files.h"

namespace strata {
namespace {

using profiler::EventKind;
using ::testing::HasSubstr;

std::vector<const profiler::Event*> of_kind(const profiler::Result& r, EventKind kind) {
  std::vector<const profiler::Event*> out;
  for (const auto& e : r.events()) {
    if (e.kind == kind) out.push_back(&e);
  }
  return out;
}

const profiler::Event* find_op(const profiler::Result& r, const std::string& name) {
  for (const auto& e : r.events()) {
    if (e.kind == EventKind::Op && e.name == name) return &e;
  }
  return nullptr;
}

TEST(Profiler, RecordsEachOpWithNameDeviceShapesAndTime) {
  const Tensor a = full({2, 3}, 1.5f), b = full({2, 3}, 2.0f), w = full({3, 4}, 0.5f);
  profiler::Profile prof;
  const Tensor c = add(a, b);
  const Tensor d = matmul(c, w);
  const profiler::Result& r = prof.stop();
  const profiler::Event* added = find_op(r, "add");
  ASSERT_NE(added, nullptr);
  EXPECT_EQ(added->device, kCPU);
  EXPECT_EQ(added->stream, 0u);
  // Operands as the kernel sees them, the output first.
  EXPECT_EQ(added->shapes, (std::vector<std::vector<int64_t>>{{2, 3}, {2, 3}, {2, 3}}));
  EXPECT_GE(added->start_ns, 0);
  EXPECT_GT(added->duration_ns, 0);
  EXPECT_EQ(added->device_ns, -1);  // no device time on the CPU
  // The name is the front end's (the op table's row is gemm's; the call names the op the user called).
  const profiler::Event* gemm = find_op(r, "matmul");
  ASSERT_NE(gemm, nullptr);
  ASSERT_GE(gemm->shapes.size(), 3u);
  EXPECT_EQ(gemm->shapes[0], (std::vector<int64_t>{1, 2, 4}));      // as the kernel sees it: a batch of one
  EXPECT_GE(gemm->start_ns, added->start_ns + added->duration_ns);  // in call order
  EXPECT_EQ(d.shape(), Shape({2, 4}));
}

TEST(Profiler, OffRecordsNothing) {
  EXPECT_FALSE(profiler::is_enabled());
  {
    profiler::Profile prof;
    (void)prof.stop();
  }
  const Tensor a = full({4}, 1.0f);
  for (int i = 0; i < 3; ++i) (void)add(a, a);
  profiler::RecordFunction range("outside");
  profiler::record_synchronization(Device("cuda:0"), "item");
  // A recording started now holds only what happens after it.
  profiler::start();
  const profiler::Result r = profiler::stop();
  EXPECT_TRUE(r.events().empty());
}

TEST(Profiler, StartTwiceAndStopWithoutStartAreErrors) {
  profiler::start();
  EXPECT_THROW(profiler::start(), InvalidArgumentError);
  (void)profiler::stop();
  EXPECT_THROW((void)profiler::stop(), InvalidArgumentError);
}

TEST(Profiler, SynchronisationsWithTheirCause) {
  profiler::Profile prof;
  // Counting a synchronisation needs no GPU (transfer_test.cpp); waits on the CPU are neither counted nor recorded.
  note_synchronization(Device("cuda:0"), "item");
  note_synchronization(kCPU, "item");
  const auto syncs = of_kind(prof.stop(), EventKind::Synchronization);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(syncs[0]->name, "item");
  EXPECT_EQ(syncs[0]->device, Device("cuda:0"));
}

TEST(Profiler, AllocatorSegmentsFlushesAndOutOfMemory) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  testing::TestAllocator t(64 * kMiB);
  profiler::Profile prof;
  { DataPtr p = t.allocator.allocate(12 * kMiB, nullptr, "test"); }
  t.allocator.empty_cache();
  EXPECT_THROW(t.allocator.allocate(100 * kMiB, nullptr, "huge"), OutOfMemoryError);
  const auto events = of_kind(prof.stop(), EventKind::Allocator);
  std::vector<std::string> names;
  for (const auto* e : events) names.push_back(e->name);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"segment_alloc", "segment_free", "cache_flush", "out_of_memory"}));
  // empty_cache() frees the 12 MiB segment; the refused request flushes the cache again before giving up.
  std::vector<std::string> flushes;
  for (const auto* e : events) {
    if (e->name == "segment_alloc") EXPECT_GE(e->bytes, static_cast<int64_t>(12 * kMiB));
    if (e->name == "segment_free") EXPECT_EQ(e->detail, "empty_cache");
    if (e->name == "cache_flush") flushes.push_back(e->detail);
    if (e->name == "out_of_memory") {
      EXPECT_EQ(e->bytes, static_cast<int64_t>(100 * kMiB));
      EXPECT_EQ(e->detail, "huge");
    }
  }
  ASSERT_FALSE(flushes.empty());
  EXPECT_EQ(flushes.front(), "empty_cache");
}

TEST(Profiler, RangesNestOpsAndThreadsAreApart) {
  const Tensor a = full({8}, 1.0f);
  profiler::Profile prof;
  {
    profiler::RecordFunction outer("step");
    (void)add(a, a);
    (void)mul(a, a);
  }
  std::thread other([&] { (void)sub(a, a); });
  other.join();
  const profiler::Result& r = prof.stop();
  const auto ranges = of_kind(r, EventKind::Range);
  ASSERT_EQ(ranges.size(), 1u);
  const profiler::Event* step = ranges[0];
  for (const char* name : {"add", "mul"}) {
    const profiler::Event* op = find_op(r, name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_EQ(op->thread, step->thread);
    EXPECT_GE(op->start_ns, step->start_ns);
    EXPECT_LE(op->start_ns + op->duration_ns, step->start_ns + step->duration_ns);
  }
  const profiler::Event* subtracted = find_op(r, "sub");
  ASSERT_NE(subtracted, nullptr);
  EXPECT_NE(subtracted->thread, step->thread);
  // The range's self time leaves out the ops inside it.
  for (const auto& avg : r.key_averages()) {
    if (avg.name != "step") continue;
    EXPECT_EQ(avg.calls, 1);
    EXPECT_LT(avg.self_cpu_ns, avg.cpu_total_ns);
  }
}

TEST(Profiler, ChromeTraceParsesWithTheExpectedFields) {
  const Tensor a = full({2, 5}, 1.0f);
  testing::TempDir dir;
  const std::string path = (dir.path() / "trace.json").string();
  {
    profiler::Profile prof;
    {
      profiler::RecordFunction step("step");
      (void)relu(add(a, a));
    }
    note_synchronization(Device("cuda:0"), "item");
    prof.stop().export_chrome_trace(path);
  }
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  ASSERT_TRUE(trace.contains("traceEvents"));
  bool op = false, range = false, sync = false, thread_name = false;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("name") && e.contains("pid")) << e.dump();
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") thread_name = true;
    if (ph == "X") {
      EXPECT_TRUE(e["ts"].is_number() && e["dur"].is_number() && e.contains("tid")) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
    if (ph == "X" && e["cat"] == "op" && e["name"] == "add") {
      op = true;
      EXPECT_EQ(e["args"]["device"], "cpu");
      EXPECT_EQ(e["args"]["shapes"], nlohmann::json::parse("[[2,5],[2,5],[2,5]]"));
    }
    if (ph == "X" && e["cat"] == "range" && e["name"] == "step") range = true;
    if (ph == "i" && e["cat"] == "sync") {
      sync = true;
      EXPECT_EQ(e["args"]["cause"], "item");
      EXPECT_EQ(e["args"]["device"], "cuda:0");
      EXPECT_EQ(e["s"], "t");
    }
  }
  EXPECT_TRUE(op && range && sync && thread_name);
}

TEST(Profiler, TableListsTopOpsByTotalTime) {
  const Tensor a = full({64}, 1.0f);
  profiler::Profile prof;
  for (int i = 0; i < 5; ++i) (void)add(a, a);
  (void)mul(a, a);
  const profiler::Result& r = prof.stop();
  const std::string table = r.table("cpu_time_total", 10);
  EXPECT_THAT(table, HasSubstr("Name"));
  EXPECT_THAT(table, HasSubstr("CPU total"));
  EXPECT_THAT(table, HasSubstr("# of Calls"));
  EXPECT_THAT(table, HasSubstr("Self CPU time total:"));
  // By count: add (5 calls) comes first, and row_limit 1 leaves mul out.
  const std::string by_count = r.table("count", 1);
  EXPECT_THAT(by_count, HasSubstr("add"));
  EXPECT_THAT(by_count, ::testing::Not(HasSubstr("mul")));
  EXPECT_THAT(by_count, ::testing::ContainsRegex("add +[0-9.]+% .* 5\n"));
  EXPECT_THROW((void)r.table("wall_time", 10), InvalidArgumentError);
}

TEST(Profiler, UnwritablePathIsRefusedNamingIt) {
  const std::string path = "/nonexistent-strata-dir/trace.json";
  try {
    profiler::check_writable(path);
    FAIL() << "no error";
  } catch (const IOError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
  }
  profiler::Result empty;
  EXPECT_THROW(empty.export_chrome_trace(path), IOError);
}

// Named CpuDevice* so that the ctest entry with STRATA_CPU_DEVICES=2 runs it (tests/CMakeLists.txt).
TEST(CpuDeviceProfiler, CopiesBetweenTwoCpuDevicesWithBytesAndDirection) {
  if (device_count(DeviceType::CPU) < 2) GTEST_SKIP() << "needs STRATA_CPU_DEVICES=2";
  const Tensor a = full({256}, 1.0f);
  profiler::Profile prof;
  const Tensor b = a.to(Device("cpu:1"));
  const auto copies = of_kind(prof.stop(), EventKind::Copy);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0]->name, "copy D2D");
  EXPECT_EQ(copies[0]->bytes, 256 * 4);
  EXPECT_EQ(copies[0]->detail, "cpu -> cpu:1");
  EXPECT_EQ(b.device(), Device("cpu:1"));
}

}  // namespace
}  // namespace strata
