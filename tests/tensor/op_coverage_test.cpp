// The op table against the cross-device cases (ggml's test-backend-ops idea): every kernel registered for a device
// type other than the CPU must be reached by a case that compares that device with the CPU. The cases are run here
// again, in this process, while the op table counts the kernels they reach (Note [Counting kernel calls] in
// ops/kernel_table.h), so the table below says what the cases exercise, not what they were meant to.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "strata/ops/kernel_table.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/registry.h"
#include "tensor/cross_device_cases.h"

namespace strata {
namespace {

using Pairs = std::vector<std::pair<std::string, DeviceType>>;

using DeviceTypes = std::vector<DeviceType>;

bool contains(const DeviceTypes& types, int t) {
  return std::find(types.begin(), types.end(), static_cast<DeviceType>(t)) != types.end();
}

// Every registered (op, device type) pair that no case reached, for the device types the cases ran on (`ran`, the
// CPU excepted). A plugin whose backend declined (no device) may still have registered its kernels when it was
// loaded: those pairs could not run here, and the table says so instead.
Pairs uncovered_pairs(const std::vector<ops::KernelTableRow>& rows, const DeviceTypes& ran) {
  Pairs uncovered;
  for (const auto& row : rows) {
    for (int t = 0; t < kDeviceTypeCount; ++t) {
      if (static_cast<DeviceType>(t) == DeviceType::CPU || !row.registered[t] || !contains(ran, t)) continue;
      if (row.calls[t] == 0) uncovered.emplace_back(row.op, static_cast<DeviceType>(t));
    }
  }
  return uncovered;
}

std::string dtypes_text(const std::optional<ops::DTypeSet>& dtypes) {
  if (!dtypes) return "not listed";
  if (*dtypes == ops::DTypeSet::all()) return "all";
  std::string text;
  for (int d = 0; d < kDTypeCount; ++d) {
    if (!dtypes->contains(static_cast<DType>(d))) continue;
    if (!text.empty()) text += ",";
    text += std::string(dtype_name(static_cast<DType>(d)));
  }
  return text;
}

// One line per op: for the CPU, the reference, how often the cases reached it; for every other device type,
// "covered" with the count, "UNCOVERED", "no device" where it has a kernel that could not run here, "stand-in" where
// its kernel handles no dtype (it only says what is missing), or "-" where it has no kernel; then the dtypes the CPU
// kernel lists.
std::string coverage_table(const std::vector<ops::KernelTableRow>& rows, const DeviceTypes& ran) {
  std::ostringstream out;
  out << fmt::format("{:<30}", "op");
  for (int t = 0; t < kDeviceTypeCount; ++t) {
    out << fmt::format("{:<18}", device_type_name(static_cast<DeviceType>(t)));
  }
  out << "cpu dtypes\n";
  for (const auto& row : rows) {
    out << fmt::format("{:<30}", row.op);
    for (int t = 0; t < kDeviceTypeCount; ++t) {
      std::string cell = "-";
      if (row.registered[t] && static_cast<DeviceType>(t) == DeviceType::CPU) {
        cell = fmt::format("reference ({})", row.calls[t]);
      } else if (row.registered[t] && row.dtypes[t] && *row.dtypes[t] == ops::DTypeSet{}) {
        cell = "stand-in";
      } else if (row.registered[t] && !contains(ran, t)) {
        cell = "no device";
      } else if (row.registered[t]) {
        cell = row.calls[t] > 0 ? fmt::format("covered ({})", row.calls[t]) : "UNCOVERED";
      }
      out << fmt::format("{:<18}", cell);
    }
    out << dtypes_text(row.dtypes[static_cast<int>(DeviceType::CPU)]) << "\n";
  }
  return out.str();
}

// Counting is process-wide: it is turned off again however the test ends.
struct CountingKernelCalls {
  CountingKernelCalls() {
    ops::reset_kernel_call_counts();
    ops::set_kernel_call_counting(true);
  }
  ~CountingKernelCalls() { ops::set_kernel_call_counting(false); }
};

TEST(OpCoverage, EveryRegisteredPairHasACrossDeviceCase) {
  // Asking for a device type's backend loads it, which fills its column of the op table (the CUDA plugin).
  std::vector<Device> devices;  // the first device of every other type that has one
  for (int t = 0; t < kDeviceTypeCount; ++t) {
    const auto type = static_cast<DeviceType>(t);
    if (type != DeviceType::CPU && device_count(type) > 0) devices.emplace_back(type, 0);
  }
  std::optional<cuda::DeviceGuard> current;  // as in the CrossDevice suite
  if (cuda::is_available()) current.emplace(0);
  {
    const CountingKernelCalls counting;
    manual_seed(7);
    const std::vector<Tensor> host = testing::cross_device_inputs();
    if (devices.empty()) {
      // No other device type here: the cases still run on the CPU, so that the table shows what they reach.
      for (const testing::OpCase& op : testing::op_cases()) op.run(host);
    }
    for (Device device : devices) {
      SCOPED_TRACE(device.str());
      std::vector<Tensor> moved;
      for (const Tensor& t : host) moved.push_back(t.to(device));
      for (const testing::OpCase& op : testing::op_cases()) testing::expect_matches_cpu(op, host, moved, device);
    }
  }
  const auto rows = ops::kernel_table();
  std::cout << "Cross-device coverage of the op table (calls counted while the cases ran";
  if (devices.empty()) std::cout << "; no device type but the CPU here: " << cuda::unavailable_reason();
  DeviceTypes ran;
  for (Device device : devices) ran.push_back(device.type());
  std::cout << "):\n" << coverage_table(rows, ran);
  const Pairs uncovered = uncovered_pairs(rows, ran);
  std::vector<std::string> names;
  for (const auto& [op, type] : uncovered) names.push_back(fmt::format("{} on {}", op, device_type_name(type)));
  EXPECT_TRUE(uncovered.empty()) << uncovered.size() << " registered kernel(s) have no cross-device case that reaches"
                                 << " them; add one to tests/tensor/cross_device_cases.h: " << fmt::format(
                                        "{}", fmt::join(names, ", "));
}

// The check itself, on a table made up for it: here no device type but the CPU has kernels, so the test above
// cannot fail on this machine, and this one shows that it would.
TEST(OpCoverage, ARegisteredPairThatNoCaseReachedIsUncovered) {
  const auto cpu = static_cast<int>(DeviceType::CPU);
  const auto cuda = static_cast<int>(DeviceType::CUDA);
  std::vector<ops::KernelTableRow> rows(3);
  rows[0].op = "reached";
  rows[0].registered[cpu] = rows[0].registered[cuda] = true;
  rows[0].calls[cuda] = 2;
  rows[1].op = "missed";
  rows[1].registered[cpu] = rows[1].registered[cuda] = true;
  rows[1].calls[cpu] = 5;  // the CPU reference ran, the device did not
  rows[2].op = "cpu_only";
  rows[2].registered[cpu] = true;
  EXPECT_EQ(uncovered_pairs(rows, {DeviceType::CUDA}), (Pairs{{"missed", DeviceType::CUDA}}));
  const std::string table = coverage_table(rows, {DeviceType::CUDA});
  EXPECT_NE(table.find("UNCOVERED"), std::string::npos) << table;
  EXPECT_NE(table.find("covered (2)"), std::string::npos) << table;
  rows[2].registered[cuda] = true;  // a kernel of no dtype, which only says what is missing
  rows[2].dtypes[cuda] = ops::DTypeSet{};
  EXPECT_NE(coverage_table(rows, {DeviceType::CUDA}).find("stand-in"), std::string::npos);
  rows[2].registered[cuda] = false;
  // Without a device of that type the cases could not reach it: not a failure, and the table says why.
  EXPECT_TRUE(uncovered_pairs(rows, {}).empty());
  EXPECT_NE(coverage_table(rows, {}).find("no device"), std::string::npos) << coverage_table(rows, {});
}

// The counts come from the kernels the ops really call: sum goes through "reduce", and nothing is counted while
// counting is off.
TEST(OpCoverage, CountsTheKernelsAnOpReaches) {
  const auto calls_of = [](const std::string& op) {
    for (const auto& row : ops::kernel_table()) {
      if (row.op == op) return row.calls[static_cast<int>(DeviceType::CPU)];
    }
    ADD_FAILURE() << "no op " << op;
    return std::uint64_t{0};
  };
  const Tensor x = ones({4, 4});
  {
    const CountingKernelCalls counting;
    (void)sum(x, {1});
    EXPECT_GE(calls_of("reduce"), 1u);
    EXPECT_EQ(calls_of("gemm"), 0u);
  }
  (void)sum(x, {1});
  (void)matmul(x, x);
  EXPECT_EQ(calls_of("gemm"), 0u);
}

}  // namespace
}  // namespace strata
