// STRATA_MEMORY_LIMIT parsing (Note [STRATA_MEMORY_LIMIT]) and format_bytes.
#include "strata/runtime/memory_limit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "strata/core/error.h"
#include "strata/runtime/allocator.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

MemoryLimit bytes_limit(Device device, std::size_t bytes) { return MemoryLimit{device, bytes, std::nullopt}; }

// The limit in bytes of the single entry that `text` gives.
std::size_t single_limit(const std::string& text) {
  const auto limits = parse_memory_limits(text);
  EXPECT_EQ(limits.size(), 1u) << text;
  return limits.empty() ? 0 : limits[0].resolve(1000);
}

TEST(FormatBytes, UsesBinaryUnitsWithTwoDecimals) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(2 * kGiB), "2.00 GiB");
  EXPECT_EQ(format_bytes(kGiB - 1), "1.00 GiB");  // not "1024.00 MiB"
  EXPECT_EQ(format_bytes(std::size_t{5} << 40), "5.00 TiB");
}

TEST(MemoryLimitParsing, ReadsTheExampleOfTheDocumentation) {
  const auto limits = parse_memory_limits("cuda:0=2GiB,cpu=8GiB");
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0], bytes_limit(Device(DeviceType::CUDA, 0), 2 * kGiB));
  EXPECT_EQ(limits[1], (MemoryLimit{kCPU, 8 * kGiB, std::nullopt, /*whole_type=*/true}));
}

TEST(MemoryLimitParsing, AcceptsEveryUnit) {
  EXPECT_EQ(single_limit("cpu=512B"), 512u);
  EXPECT_EQ(single_limit("cpu=1KiB"), 1024u);
  EXPECT_EQ(single_limit("cpu=3MiB"), 3 * kMiB);
  EXPECT_EQ(single_limit("cpu=2GiB"), 2 * kGiB);
  EXPECT_EQ(single_limit("cpu=1TiB"), std::size_t{1} << 40);
  EXPECT_EQ(single_limit("cpu=1KB"), 1'000u);
  EXPECT_EQ(single_limit("cpu=3MB"), 3'000'000u);
  EXPECT_EQ(single_limit("cpu=2GB"), 2'000'000'000u);
  EXPECT_EQ(single_limit("cpu=1TB"), 1'000'000'000'000u);
  EXPECT_EQ(single_limit("cpu=1048576"), kMiB);
  EXPECT_EQ(single_limit("cpu=1.5MiB"), kMiB + kMiB / 2);
  EXPECT_EQ(single_limit("cpu=2gib"), 2 * kGiB);  // units ignore case
}

TEST(MemoryLimitParsing, IgnoresSpacesAndEmptyEntries) {
  const auto limits = parse_memory_limits(" cuda:1 = 4 GiB , cpu=1GiB,");
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0], bytes_limit(Device(DeviceType::CUDA, 1), 4 * kGiB));
  EXPECT_TRUE(parse_memory_limits("").empty());
}

TEST(MemoryLimitParsing, NumberWithAPointAndNoUnitIsAFraction) {
  const auto limits = parse_memory_limits("cuda:0=0.5,cuda:1=1.0");
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0].fraction, 0.5);
  EXPECT_EQ(limits[0].bytes, std::nullopt);
  EXPECT_EQ(limits[0].resolve(8 * kGiB), 4 * kGiB);
  EXPECT_EQ(limits[1].resolve(8 * kGiB), 8 * kGiB);
  EXPECT_EQ(single_limit("cpu=1"), 1u);  // without the point it is bytes
  EXPECT_EQ(single_limit("cpu=0.00000000000001"), 1u);  // a positive fraction is at least one byte, as cpu=1B
}

TEST(MemoryLimitParsing, DeviceEntryBeatsTheWholeTypeEntry) {
  const auto limits = parse_memory_limits("cuda=1GiB,cuda:1=2GiB");
  EXPECT_EQ(find_memory_limit(limits, Device(DeviceType::CUDA, 1))->resolve(0), 2 * kGiB);
  EXPECT_EQ(find_memory_limit(limits, Device(DeviceType::CUDA, 3))->resolve(0), kGiB);
  EXPECT_EQ(find_memory_limit(limits, kCPU), std::nullopt);
}

struct MalformedCase {
  const char* text;
  const char* entry;  // the entry the message must quote
  const char* why;    // part of the reason
};

class MalformedMemoryLimit : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedMemoryLimit, ThrowsNamingTheVariableTheEntryAndTheForm) {
  const MalformedCase& c = GetParam();
  try {
    parse_memory_limits(c.text);
    FAIL() << "accepted " << c.text;
  } catch (const InvalidArgumentError& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, HasSubstr(std::string("STRATA_MEMORY_LIMIT='") + c.text + "'"));
    EXPECT_THAT(message, HasSubstr(std::string("entry '") + c.entry + "'"));
    EXPECT_THAT(message, HasSubstr(c.why));
    EXPECT_THAT(message, HasSubstr("DEVICE=SIZE"));
    EXPECT_THAT(message, HasSubstr("'cuda:0=2GiB,cpu=8GiB'"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Strings, MalformedMemoryLimit,
    ::testing::Values(MalformedCase{"cuda:0", "cuda:0", "no '='"},
                      MalformedCase{"cuda:0=", "cuda:0=", "size is missing"},
                      MalformedCase{"gpu=1GiB", "gpu=1GiB", "'gpu' is not a device"},
                      MalformedCase{"cpu=1GiB,cuda:x=1GiB", "cuda:x=1GiB", "not a device"},
                      MalformedCase{"cuda:0=2GX", "cuda:0=2GX", "unknown unit 'GX'"},
                      MalformedCase{"cuda:0=lots", "cuda:0=lots", "does not start with a number"},
                      MalformedCase{"cuda:0=-1GiB", "cuda:0=-1GiB", "does not start with a number"},
                      MalformedCase{"cuda:0=1.2.3GiB", "cuda:0=1.2.3GiB", "does not start with a number"},
                      MalformedCase{"cuda:0=1.5", "cuda:0=1.5", "must be in (0, 1]"},
                      MalformedCase{"cuda:0=0.0", "cuda:0=0.0", "must be in (0, 1]"},
                      MalformedCase{"cuda:0=0", "cuda:0=0", "must be positive"},
                      MalformedCase{"cuda:0=99999999999TiB", "cuda:0=99999999999TiB", "too large"},
                      MalformedCase{"cuda:0=99999999999999999999", "cuda:0=99999999999999999999", "too large"},
                      // Fits in 64 unsigned bits, not in the allocator's int64 counts.
                      MalformedCase{"cpu=9223372036854775808", "cpu=9223372036854775808", "the most is 2^63-1 bytes"},
                      MalformedCase{"cpu=8388608.0TiB", "cpu=8388608.0TiB", "the most is 2^63-1 bytes"},
                      MalformedCase{"cpu=1GiB,cpu=2GiB", "cpu=2GiB", "given a limit twice"}));

// The variable is read when a device's allocator is created, so these run in a fresh process.
class MemoryLimitEnvironment : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(MemoryLimitEnvironment, AppliesWhenTheCpuAllocatorIsCreated) {
  EXPECT_EXIT(
      {
        setenv(kMemoryLimitVariable, "cuda=1GiB,cpu=64MiB", 1);
        const bool applied = allocator(kCPU).limit() == 64 * kMiB;
        bool refused = false;
        try {
          allocate(kCPU, 128 * kMiB);
        } catch (const OutOfMemoryError&) {
          refused = true;
        }
        std::exit(applied && refused ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(MemoryLimitEnvironment, MalformedValueFailsTheFirstAllocation) {
  EXPECT_EXIT(
      {
        setenv(kMemoryLimitVariable, "cpu=lots", 1);
        try {
          allocate(kCPU, 16);
        } catch (const InvalidArgumentError& e) {
          std::exit(std::string(e.what()).find("STRATA_MEMORY_LIMIT='cpu=lots'") != std::string::npos ? 0 : 2);
        }
        std::exit(1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace strata
