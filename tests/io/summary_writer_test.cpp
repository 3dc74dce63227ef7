#include "strata/io/summary_writer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "event_file_reader.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "test_files.h"

namespace strata {
namespace {

using namespace testing;  // TempDir and the event file reader

TEST(Crc32c, KnownVectors) {
  // The check value of CRC-32C, and RFC 3720's (iSCSI) test patterns.
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(masked_crc32c("123456789"), masked(0xE3069283u));
}

TEST(Tfrecord, FramesLengthDataAndBothCrcs) {
  const std::string record = tfrecord("abc");
  ASSERT_EQ(record.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(little_endian<uint64_t>(record, 0), 3u);
  EXPECT_EQ(little_endian<uint32_t>(record, 8), masked(crc32c(std::string_view(record).substr(0, 8))));
  EXPECT_EQ(record.substr(12, 3), "abc");
  EXPECT_EQ(little_endian<uint32_t>(record, 15), masked(crc32c("abc")));
}

TEST(SummaryWriter, FileNameAndFirstRecordAreTensorFlows) {
  TempDir dir;
  SummaryWriter w(dir / "run", ".x");
  EXPECT_TRUE(std::regex_match(w.file().filename().string(),
                               std::regex(R"(events\.out\.tfevents\.\d{10}\.[^.]+.*\.\d+\.\d+\.x)")))
      << w.file();
  EXPECT_EQ(w.file().parent_path(), dir / "run");
  w.close();
  const std::vector<Event> events = read_events(w.file());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(events[0].wall_time, now, 60);
}

TEST(SummaryWriter, ScalarsComeBackWithTagStepValueAndWallTime) {
  TempDir dir;
  SummaryWriter w(dir.path());
  w.add_scalar("loss/train", 0.5, 1, 1000.25);
  w.add_scalar("loss/train", 0.25, 2, 1001.5);
  w.add_scalar("lr", 1e-3, -3);  // negative steps encode as 10-byte varints
  w.add_scalar("big", 1e30, int64_t{1} << 40);
  const Records records = read_records(w.file());  // readable before flush() or close()
  EXPECT_EQ(records.data.size(), 5u);
  EXPECT_EQ(records.trailing_bytes, 0u);
  w.close();
  const std::vector<Event> e = read_events(w.file());
  ASSERT_EQ(e.size(), 5u);
  ASSERT_EQ(e[1].values.size(), 1u);
  EXPECT_EQ(e[1].values[0].tag, "loss/train");
  EXPECT_EQ(e[1].values[0].simple_value, 0.5f);
  EXPECT_EQ(e[1].step, 1);
  EXPECT_EQ(e[1].wall_time, 1000.25);
  EXPECT_EQ(e[2].values[0].simple_value, 0.25f);
  EXPECT_EQ(e[2].step, 2);
  EXPECT_EQ(e[2].wall_time, 1001.5);
  EXPECT_EQ(e[3].values[0].tag, "lr");
  EXPECT_EQ(e[3].values[0].simple_value, 1e-3f);
  EXPECT_EQ(e[3].step, -3);
  EXPECT_GT(e[3].wall_time, 1e9);
  EXPECT_EQ(e[4].step, int64_t{1} << 40);
  EXPECT_EQ(e[4].values[0].simple_value, 1e30f);
  EXPECT_THROW(w.add_scalar("late", 1, 5), IOError);
}

TEST(SummaryWriter, AddScalarsWritesOneDirectoryPerTagUnderTheMainTag) {
  TempDir dir;
  SummaryWriter w(dir.path());
  w.add_scalars("run/loss", {{"train", 0.75}, {"test", 0.5}}, 7, 42.0);
  w.add_scalars("run/loss", {{"train", 0.5}}, 8, 43.0);
  w.flush();
  w.close();
  EXPECT_EQ(read_events(w.file()).size(), 1u);  // only the file version in the parent's own file
  for (const auto& [name, steps] : std::map<std::string, std::vector<std::pair<int64_t, float>>>{
           {"run_loss_train", {{7, 0.75f}, {8, 0.5f}}}, {"run_loss_test", {{7, 0.5f}}}}) {
    const std::vector<std::filesystem::path> files = event_files(dir / name);
    ASSERT_EQ(files.size(), 1u) << name;
    const std::vector<Event> e = read_events(files[0]);
    ASSERT_EQ(e.size(), steps.size() + 1) << name;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      EXPECT_EQ(e[i + 1].step, steps[i].first);
      ASSERT_EQ(e[i + 1].values.size(), 1u);
      EXPECT_EQ(e[i + 1].values[0].tag, "run/loss");
      EXPECT_EQ(e[i + 1].values[0].simple_value, steps[i].second);
    }
  }
}

TEST(SummaryWriter, HistogramWithNumberedBinsIsNumPys) {
  TempDir dir;
  SummaryWriter w(dir.path());
  // np.histogram(arange(10), bins=5): edges 0, 1.8, 3.6, 5.4, 7.2, 9 and two values in each bucket; PyTorch then
  // adds an empty bucket on the left, whose right limit is 0.
  w.add_histogram("w", arange(0, 10, 1, TensorOptions(DType::F32)), 3, int64_t{5});
  const std::vector<double> sevens{7.0, 7.0};
  w.add_histogram("same", sevens, 4, int64_t{2});
  w.close();
  const std::vector<Event> e = read_events(w.file());
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[1].step, 3);
  ASSERT_TRUE(e[1].values.at(0).histo);
  const Histogram& h = *e[1].values[0].histo;
  EXPECT_EQ(e[1].values[0].tag, "w");
  EXPECT_EQ(h.min, 0);
  EXPECT_EQ(h.max, 9);
  EXPECT_EQ(h.num, 10);
  EXPECT_EQ(h.sum, 45);
  EXPECT_EQ(h.sum_squares, 285);
  EXPECT_EQ(h.counts, (std::vector<double>{0, 2, 2, 2, 2, 2}));
  ASSERT_EQ(h.limits.size(), 6u);
  const double expected[] = {0, 1.8, 3.6, 5.4, 7.2, 9};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(h.limits[i], expected[i], 1e-12);
  // All equal: NumPy's range widens to [6.5, 7.5], both values in the upper bucket, [7, 7.5].
  const Histogram& same = *e[2].values.at(0).histo;
  EXPECT_EQ(same.counts, (std::vector<double>{0, 2}));
  EXPECT_EQ(same.limits, (std::vector<double>{7.0, 7.5}));
}

TEST(SummaryWriter, HistogramWithTensorFlowBinsKeepsTheNonemptyRange) {
  TempDir dir;
  SummaryWriter w(dir.path());
  const std::vector<double> values{-1.0, 1.0, 1.0, 2.0};
  w.add_histogram("tf", values, 1);
  w.close();
  const Histogram h = *read_events(w.file()).at(1).values.at(0).histo;
  ASSERT_EQ(h.counts.size(), h.limits.size());
  EXPECT_EQ(h.counts.front(), 0);  // the empty bucket before the first nonempty one
  EXPECT_NE(h.counts.back(), 0);
  double total = 0;
  for (const double c : h.counts) total += c;
  EXPECT_EQ(total, 4);
  // Every value lies at or under the right limit of its bucket and over the previous one's.
  EXPECT_LT(h.limits.front(), -1.0);
  EXPECT_GT(h.limits.back(), 2.0);
  EXPECT_LT(h.limits.back(), 2.0 * 1.1 + 1e-9);
  int positive = 0;
  for (std::size_t i = 1; i < h.limits.size(); ++i) {
    if (h.limits[i - 1] <= 0) continue;
    EXPECT_NEAR(h.limits[i] / h.limits[i - 1], 1.1, 1e-9) << "buckets over 0 grow by 1.1x";
    ++positive;
  }
  EXPECT_GT(positive, 290) << "from 1e-12 to 2";
}

TEST(SummaryWriter, BadHistogramsAndDirectoriesAreRefusedByName) {
  TempDir dir;
  SummaryWriter w(dir.path());
  const std::vector<double> none;
  EXPECT_THROW(w.add_histogram("h", none, 0), InvalidArgumentError);
  const std::vector<double> nan{1.0, std::nan("")};
  EXPECT_THROW(w.add_histogram("h", nan, 0), InvalidArgumentError);
  const std::vector<double> one{1.0};
  EXPECT_THROW(w.add_histogram("h", one, 0, "auto"), InvalidArgumentError);
  EXPECT_THROW(w.add_histogram("h", one, 0, int64_t{0}), InvalidArgumentError);
  testing::write_file(dir / "plain", {1, 2});
  try {
    SummaryWriter under_a_file(dir / "plain" / "run");
    ADD_FAILURE() << "a log directory under a regular file was taken";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "plain" / "run").string()), std::string::npos) << e.what();
  }
}

// Note [TensorBoard event files]: a writer killed with SIGKILL while it writes leaves whole records, each with its
// CRCs right, and every step it wrote, but for at most a part of the last record.
TEST(SummaryWriter, KilledWriterLeavesWholeRecords) {
  TempDir dir;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SummaryWriter w(dir.path());
    for (int64_t step = 0;; ++step) w.add_scalar("loss", static_cast<double>(step) * 0.5, step);
  }
  std::vector<std::filesystem::path> files;
  for (int i = 0; i < 2000; ++i) {
    files = event_files(dir.path());
    if (!files.empty() && std::filesystem::file_size(files[0]) > 100000) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_EQ(files.size(), 1u);
  const Records records = read_records(files[0]);
  EXPECT_LT(records.trailing_bytes, records.data.back().size() + 16) << "more than one record was cut";
  ASSERT_GT(records.data.size(), 1000u);
  EXPECT_EQ(parse_event(records.data[0]).file_version, "brain.Event:2");
  for (std::size_t i = 1; i < records.data.size(); ++i) {
    const Event e = parse_event(records.data[i]);
    ASSERT_EQ(e.step, static_cast<int64_t>(i - 1));
    ASSERT_EQ(e.values.at(0).simple_value, static_cast<float>(i - 1) * 0.5f);
  }
}

}  // namespace
}  // namespace strata
