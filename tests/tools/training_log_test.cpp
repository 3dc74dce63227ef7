#include "training_log.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "event_file_reader.h"
#include "strata/core/error.h"

namespace strata {
namespace {

using namespace testing;  // TempDir and the event file reader

// Every (tag, step, value) of a file, by tag.
std::map<std::string, std::vector<std::pair<int64_t, float>>> scalars(const std::filesystem::path& file) {
  std::map<std::string, std::vector<std::pair<int64_t, float>>> out;
  for (const Event& e : read_events(file)) {
    for (const Value& v : e.values) out[v.tag].emplace_back(e.step, v.simple_value.value());
  }
  return out;
}

// Note [What --logdir writes]: the steps of a report resumed inside an epoch continue the run's step count, and the
// epoch's figures sit at its last step.
TEST(TrainingLog, StepsOfAResumedEpochContinueTheRunsCount) {
  TempDir dir;
  train::TrainingLog log(dir / "runs", Device("cpu"));
  train::EpochReport r;
  r.epoch = 2;
  r.first_step = 2;  // resumed after 2 of the epoch's 5 steps
  r.step_losses = {0.5, 0.25, 0.125};
  r.step_lrs = {0.1, 0.05, 0.025};
  r.train_loss = 0.3;
  r.train_accuracy = 0.75;
  r.test_accuracy = 0.625;
  r.seconds = 2;
  r.images_per_second = 1000;
  r.peak_memory_bytes = 3 << 20;
  r.synchronizations = 4;
  r.host_to_device_copies = 5;
  r.device_to_host_copies = 6;
  r.device_to_device_copies = 7;
  log.epoch(r, 5);
  const auto got = scalars(log.file());
  using Steps = std::vector<std::pair<int64_t, float>>;
  EXPECT_EQ(got.at("step/loss"), (Steps{{8, 0.5f}, {9, 0.25f}, {10, 0.125f}}));
  EXPECT_EQ(got.at("step/lr"), (Steps{{8, 0.1f}, {9, 0.05f}, {10, 0.025f}}));
  const std::map<std::string, float> epoch{{"epoch/train_loss", 0.3f},
                                           {"epoch/train_accuracy", 0.75f},
                                           {"epoch/test_accuracy", 0.625f},
                                           {"epoch/seconds", 2},
                                           {"epoch/images_per_second", 1000},
                                           {"memory/peak_mib/cpu", 3},
                                           {"transfers/synchronizations", 4},
                                           {"transfers/host_to_device_copies", 5},
                                           {"transfers/device_to_host_copies", 6},
                                           {"transfers/device_to_device_copies", 7}};
  for (const auto& [tag, value] : epoch) EXPECT_EQ(got.at(tag), (Steps{{10, value}})) << tag;
  EXPECT_EQ(got.size(), epoch.size() + 2);
}

// The language model's evaluations: its steps at the run's iteration count, the evaluation's figures at its iteration,
// and no rate, memory or counters for the first evaluation, before any step.
TEST(TrainingLog, ALanguageModelsEvaluationsAtTheirIterations) {
  TempDir dir;
  train::TrainingLog log(dir / "runs", Device("cpu"));
  train::GptReport first;
  first.train_loss = 4.5;
  first.val_loss = 4.25;
  log.evaluation(first);
  train::GptReport r;
  r.iter = 3;
  r.first_step = 1;  // resumed after iteration 1
  r.step_losses = {3.5, 3.25};
  r.step_lrs = {0.5, 0.25};
  r.train_loss = 3;
  r.val_loss = 3.125;
  r.tokens_per_second = 1000;
  r.peak_memory_bytes = 2 << 20;
  r.synchronizations = 0;
  log.evaluation(r);
  const auto got = scalars(log.file());
  using Steps = std::vector<std::pair<int64_t, float>>;
  EXPECT_EQ(got.at("step/loss"), (Steps{{2, 3.5f}, {3, 3.25f}}));
  EXPECT_EQ(got.at("step/lr"), (Steps{{2, 0.5f}, {3, 0.25f}}));
  EXPECT_EQ(got.at("eval/train_loss"), (Steps{{0, 4.5f}, {3, 3}}));
  EXPECT_EQ(got.at("eval/val_loss"), (Steps{{0, 4.25f}, {3, 3.125f}}));
  EXPECT_EQ(got.at("eval/tokens_per_second"), (Steps{{3, 1000}}));
  EXPECT_EQ(got.at("memory/peak_mib/cpu"), (Steps{{3, 2}}));
  EXPECT_EQ(got.at("transfers/synchronizations"), (Steps{{3, 0}}));
  EXPECT_EQ(got.size(), 7u);
}

TEST(TrainingLog, AnUnwritableDirectoryIsRefusedNamingTheOption) {
  TempDir dir;
  write_file(dir / "plain", {1});
  try {
    train::TrainingLog log(dir / "plain" / "runs", Device("cpu"));
    ADD_FAILURE() << "a directory under a regular file was taken";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("--logdir '" + (dir / "plain" / "runs").string() + "' cannot be written"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace strata
