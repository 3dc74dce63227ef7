// strata-smi's report: what it gathers from the runtime and how it prints it (tools/smi/report.h).
#include <gtest/gtest.h>

#include <string>

#include "strata/backends/cuda/version_text.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/cuda.h"
#include "tools/smi/report.h"

namespace strata::smi {
namespace {

constexpr int64_t kMiB = 1 << 20;

// A machine with one H100 and a 2 GiB limit on it, as the backends would describe it.
Report report_with_gpu() {
  DeviceReport cpu;
  cpu.device = kCPU;
  cpu.name = "AMD EPYC 9654";
  cpu.memory_total_bytes = 64 * (std::size_t{1} << 30);
  cpu.memory_available_bytes = 48 * (std::size_t{1} << 30);
  cpu.cores = 16;
  cpu.allocator = {3 * kMiB, 4 * kMiB, 5 * kMiB, std::nullopt};
  DeviceReport gpu;
  gpu.device = Device(DeviceType::CUDA, 0);
  gpu.name = "NVIDIA H100 80GB HBM3";
  gpu.memory_total_bytes = 80 * (std::size_t{1} << 30);
  gpu.memory_available_bytes = 79 * (std::size_t{1} << 30);
  gpu.cores = 132;
  gpu.compute_capability_major = 9;
  gpu.compute_capability_minor = 0;
  gpu.driver_version = cuda::cuda_version_text(13000);
  gpu.runtime_version = cuda::cuda_version_text(12080);
  gpu.allocator = {kMiB, 2 * kMiB, 2 * kMiB, int64_t{2} << 30};
  return {{cpu, gpu}, {}};
}

// The GPU plugin's Backend::version_text (backends/cuda/version_text.h) writes the versions strata-smi shows.
TEST(SmiReport, FormatsCudaVersionsAsMajorDotMinor) {
  EXPECT_EQ(cuda::cuda_version_text(13000), "13.0");
  EXPECT_EQ(cuda::cuda_version_text(12080), "12.8");
  EXPECT_EQ(cuda::cuda_version_text(11020), "11.2");
  EXPECT_EQ(cuda::cuda_version_text(0), "-");
}

TEST(SmiReport, ListsTheCpuFirstWithItsMemoryAndCores) {
  const Report report = collect_report();
  ASSERT_FALSE(report.devices.empty());
  const DeviceReport& cpu = report.devices.front();
  EXPECT_EQ(cpu.device, kCPU);
  EXPECT_FALSE(cpu.name.empty());
  EXPECT_GE(cpu.cores, 1);
  EXPECT_GT(cpu.memory_total_bytes, 0u);
  EXPECT_LE(cpu.memory_available_bytes, cpu.memory_total_bytes);
}

TEST(SmiReport, FormatsHipVersionsAsMajorDotMinor) {
  EXPECT_EQ(cuda::hip_version_text(50221153), "5.2");
  EXPECT_EQ(cuda::hip_version_text(60342134), "6.3");
  EXPECT_EQ(cuda::hip_version_text(0), "-");
  EXPECT_EQ(cuda::cuda_version_text(13000), "13.0");
}

TEST(SmiReport, ListsEveryGpuOrSaysWhyThereIsNone) {
  const Report report = collect_report();
  const int cuda_gpus = cuda::device_count(), amd_gpus = device_count(DeviceType::HIP);
  ASSERT_EQ(report.devices.size(), 1u + static_cast<std::size_t>(cuda_gpus + amd_gpus));
  EXPECT_EQ(report.unavailable_reason(DeviceType::HIP).empty(), amd_gpus > 0);
  EXPECT_EQ(report.unavailable_reason(DeviceType::HIP), unavailable_reason(DeviceType::HIP));
  for (int i = 0; i < amd_gpus; ++i) {
    EXPECT_EQ(report.devices[static_cast<std::size_t>(1 + cuda_gpus + i)].device, Device(DeviceType::HIP, i));
  }
  for (std::size_t i = 1; i < 1u + static_cast<std::size_t>(cuda_gpus); ++i) {
    EXPECT_EQ(report.devices[i].device, Device(DeviceType::CUDA, static_cast<int>(i - 1)));
    EXPECT_EQ(report.devices[i].name, cuda::device_name(static_cast<int>(i - 1)));
    EXPECT_GT(report.devices[i].compute_capability_major, 0);
  }
  EXPECT_EQ(report.unavailable_reason(DeviceType::CUDA).empty(), cuda::is_available());
  EXPECT_EQ(report.unavailable_reason(DeviceType::CUDA), cuda::unavailable_reason());
}

TEST(SmiReport, AllocatorFiguresFollowAnAllocation) {
  const AllocatorFigures before = describe_device(kCPU).allocator;
  AllocatorFigures during;
  {
    const DataPtr block = allocate(kCPU, 3 * kMiB);
    during = describe_device(kCPU).allocator;
  }
  const AllocatorFigures after = describe_device(kCPU).allocator;
  EXPECT_GE(during.allocated_bytes, before.allocated_bytes + 3 * kMiB);
  EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
  EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_GE(after.peak_allocated_bytes, during.allocated_bytes);
}

TEST(SmiReport, JsonDescribesEachGpu) {
  const auto j = to_json(report_with_gpu());
  ASSERT_EQ(j["devices"].size(), 2u);
  const auto& gpu = j["devices"][1];
  EXPECT_EQ(gpu["device"], "cuda:0");
  EXPECT_EQ(gpu["type"], "cuda");
  EXPECT_EQ(gpu["index"], 0);
  EXPECT_EQ(gpu["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu["memory_used_bytes"], std::size_t{1} << 30);
  EXPECT_EQ(gpu["compute_capability"], "9.0");
  EXPECT_EQ(gpu["multiprocessors"], 132);
  EXPECT_EQ(gpu["driver_version"], "13.0");
  EXPECT_EQ(gpu["runtime_version"], "12.8");
  EXPECT_EQ(gpu["allocator"]["allocated_bytes"], kMiB);
  EXPECT_EQ(gpu["allocator"]["limit_bytes"], int64_t{2} << 30);
  EXPECT_EQ(j["cuda_available"], true);
  EXPECT_TRUE(j["cuda_unavailable_reason"].is_null());
}

TEST(SmiReport, JsonDescribesTheCpuAndWhyCudaIsUnavailable) {
  Report report = report_with_gpu();
  report.devices.pop_back();
  report.unavailable_reason(DeviceType::CUDA) = "no driver";
  const auto j = to_json(report);
  ASSERT_EQ(j["devices"].size(), 1u);
  const auto& cpu = j["devices"][0];
  EXPECT_EQ(cpu["device"], "cpu");
  EXPECT_EQ(cpu["cores"], 16);
  EXPECT_FALSE(cpu.contains("compute_capability"));
  EXPECT_EQ(cpu["memory_available_bytes"], 48 * (std::size_t{1} << 30));
  EXPECT_EQ(cpu["allocator"]["reserved_bytes"], 4 * kMiB);
  EXPECT_EQ(cpu["allocator"]["peak_allocated_bytes"], 5 * kMiB);
  EXPECT_TRUE(cpu["allocator"]["limit_bytes"].is_null());
  EXPECT_EQ(j["cuda_available"], false);
  EXPECT_EQ(j["cuda_unavailable_reason"], "no driver");
}

TEST(SmiReport, TableShowsMemoryAllocatorFiguresAndDetails) {
  const std::string table = format_table(report_with_gpu());
  EXPECT_NE(table.find("Strata allocated / reserved / peak"), std::string::npos) << table;
  EXPECT_NE(table.find("16.00 GiB / 64.00 GiB   3.00 MiB / 4.00 MiB / 5.00 MiB"), std::string::npos) << table;
  EXPECT_NE(table.find("16 cores, 48.00 GiB available\n"), std::string::npos) << table;
  EXPECT_NE(table.find("cuda:0  NVIDIA H100 80GB HBM3"), std::string::npos) << table;
  EXPECT_NE(table.find("compute capability 9.0, 132 multiprocessors, driver 13.0, runtime 12.8, 79.00 GiB free, "
                       "Strata limit 2.00 GiB\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("CUDA unavailable"), std::string::npos) << table;
}

TEST(SmiReport, AnAmdGpuIsListedAsHipWithItsVersions) {
  Report report = report_with_gpu();
  DeviceReport& amd = report.devices.back();
  amd.device = Device(DeviceType::HIP, 0);
  amd.name = "AMD Instinct MI210";
  amd.driver_version = cuda::hip_version_text(50221153);
  amd.runtime_version = cuda::hip_version_text(50221153);
  const auto j = to_json(report);
  EXPECT_EQ(j["devices"][1]["device"], "hip:0");
  EXPECT_EQ(j["devices"][1]["type"], "hip");
  EXPECT_EQ(j["devices"][1]["runtime_version"], "5.2");
  EXPECT_EQ(j["hip_available"], true);
  EXPECT_NE(format_table(report).find("hip:0   AMD Instinct MI210"), std::string::npos) << format_table(report);
}

TEST(SmiReport, TableEndsWithWhyHipIsUnavailable) {
  Report report = report_with_gpu();
  report.unavailable_reason(DeviceType::HIP) = "hipGetDeviceCount failed: hipErrorNoDevice";
  const std::string table = format_table(report);
  const std::string last_line = "HIP unavailable: hipGetDeviceCount failed: hipErrorNoDevice\n";
  ASSERT_GE(table.size(), last_line.size());
  EXPECT_EQ(table.substr(table.size() - last_line.size()), last_line);
  EXPECT_EQ(to_json(report)["hip_unavailable_reason"], "hipGetDeviceCount failed: hipErrorNoDevice");
  EXPECT_EQ(to_json(report)["hip_available"], false);
}

TEST(SmiReport, TableEndsWithWhyCudaIsUnavailable) {
  Report report = report_with_gpu();
  report.devices.pop_back();
  report.unavailable_reason(DeviceType::CUDA) = "the CUDA plugin libstrata_cuda.so was not found";
  const std::string table = format_table(report);
  EXPECT_EQ(table.find("cuda:0"), std::string::npos) << table;
  const std::string last_line = "CUDA unavailable: the CUDA plugin libstrata_cuda.so was not found\n";
  ASSERT_GE(table.size(), last_line.size());
  EXPECT_EQ(table.substr(table.size() - last_line.size()), last_line);
}

}  // namespace
}  // namespace strata::smi
