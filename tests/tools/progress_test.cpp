// strata-train's progress frames (tools/train/progress.h): the style per terminal and launcher, and rates that
// never divide by a near-zero interval.
#include "progress.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace strata {
namespace {

using tools::ProgressBar;
using tools::ProgressStyle;

// Sets `name` to `value` (nullptr: unsets it) for the scope, restoring what was there.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
      had_ = true;
    }
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedVariable() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(ProgressStyle, NoneIntoAFileLinesUnderMpiARedrawnBarOtherwise) {
  EXPECT_EQ(tools::progress_style(false, false), ProgressStyle::None);
  EXPECT_EQ(tools::progress_style(false, true), ProgressStyle::None);
  EXPECT_EQ(tools::progress_style(true, false), ProgressStyle::Redrawn);
  EXPECT_EQ(tools::progress_style(true, true), ProgressStyle::Lines);
}

TEST(ProgressStyle, EachLaunchersVariableMeansMpi) {
  const ScopedVariable ompi("OMPI_COMM_WORLD_SIZE", nullptr), pmix("PMIX_RANK", nullptr), pmi("PMI_RANK", nullptr);
  EXPECT_FALSE(tools::launched_by_mpi());
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    const ScopedVariable set(name, "1");
    EXPECT_TRUE(tools::launched_by_mpi()) << name;
  }
  const ScopedVariable empty("PMIX_RANK", "");
  EXPECT_FALSE(tools::launched_by_mpi()) << "an empty variable is unset";
}

// Under mpirun (the rank's stdout a pseudo-terminal): whole lines, one per tenth, no carriage return.
TEST(ProgressBar, UnderMpiPrintsPlainLinesAtEachTenth) {
  // Made when step 1 is reported, at 100.05 s; each step takes 0.05 s.
  ProgressBar bar(ProgressStyle::Lines, 1, 3, 64, 1, 100.05);
  std::string out;
  for (int64_t step = 1; step <= 100; ++step) out += bar.frame(step, 100, 100.0 + 0.05 * static_cast<double>(step));
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  int lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 9) << out;
  EXPECT_NE(out.find("epoch 1/3  step 10/100 (10%)"), std::string::npos) << out;
  EXPECT_NE(out.find("epoch 1/3  step 90/100 (90%)"), std::string::npos) << out;
  // 64 images a step, 0.05 s a step: 1280 img/s.
  EXPECT_NE(out.find(" 1280 img/s"), std::string::npos) << out;
}

// The first step reported is the clock's start: no rate from it, and none until half a second has passed.
TEST(ProgressBar, NoRateOverANearZeroInterval) {
  ProgressBar bar(ProgressStyle::Redrawn, 1, 1, 64, 1, 10.0);
  const std::string first = bar.frame(1, 938, 10.000001);
  EXPECT_NE(first.find("     - img/s"), std::string::npos) << first;
  EXPECT_NE(first.find("ETA    -s"), std::string::npos) << first;
  const std::string early = bar.frame(3, 938, 10.2);
  EXPECT_NE(early.find("- img/s"), std::string::npos) << early;
  // 10 steps of 64 images after the first, in 1 s.
  const std::string later = bar.frame(11, 938, 11.0);
  EXPECT_NE(later.find("   640 img/s"), std::string::npos) << later;
  EXPECT_EQ(later.front(), '\r');
  // The last step clears the line.
  EXPECT_EQ(bar.frame(938, 938, 20.0), "\r" + std::string(100, ' ') + "\r");
}

TEST(ProgressBar, ARedrawnBarAtMostEveryTenthOfASecond) {
  ProgressBar bar(ProgressStyle::Redrawn, 2, 3, 8, 1, 0.0);
  EXPECT_FALSE(bar.frame(1, 100, 0.0).empty());
  EXPECT_TRUE(bar.frame(2, 100, 0.05).empty());
  EXPECT_FALSE(bar.frame(3, 100, 0.2).empty());
}

// The language model's bar: tokens per second, over the iterations between two evaluations.
TEST(ProgressBar, ALanguageModelCountsTokensBetweenEvaluations) {
  ProgressBar bar(ProgressStyle::Lines, 2, 8, 768, 1, 0.01, "tok", "eval");  // made at step 1
  std::string out;
  for (int64_t step = 1; step <= 250; ++step) out += bar.frame(step, 250, 0.01 * static_cast<double>(step));
  EXPECT_NE(out.find("eval 2/8  step 25/250 (10%)"), std::string::npos) << out;
  // 768 tokens a step, 0.01 s a step: 76800 tok/s.
  EXPECT_NE(out.find(" 76800 tok/s"), std::string::npos) << out;
  EXPECT_EQ(out.find("img/s"), std::string::npos) << out;
}

TEST(ProgressBar, NoneWritesNothing) {
  ProgressBar bar(ProgressStyle::None, 1, 1, 8, 1, 0.0);
  for (int64_t step = 1; step <= 20; ++step) EXPECT_TRUE(bar.frame(step, 20, static_cast<double>(step)).empty());
  EXPECT_TRUE(bar.clear().empty());
}

}  // namespace
}  // namespace strata
