#include "strata/backends/cpu/cpu_backend.h"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "strata/core/error.h"
#include "strata/runtime/cpu_devices.h"

namespace strata {

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kAlignment = 64;

// Reads one "Key:   123 kB" line of /proc/meminfo, in bytes.
std::size_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  std::size_t value = 0;
  std::string unit;
  while (in >> name >> value >> unit) {
    if (name == key + ":") return value * 1024;
  }
  return 0;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "CPU";
}

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}

struct CpuEvent {
  std::chrono::steady_clock::time_point time;
};

class CpuBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CPU; }
  // Virtual devices share the host: each reports the whole of its memory and cores (Note [Virtual CPU devices]).
  int device_count() const override { return cpu_device_count(); }

  DeviceProperties properties(int) const override {
    DeviceProperties p;
    p.name = cpu_model_name();
    p.total_memory = meminfo_bytes("MemTotal");
    p.multiprocessor_count = usable_cores();
    return p;
  }

  MemoryInfo memory_info(int) const override { return {meminfo_bytes("MemTotal"), meminfo_bytes("MemAvailable")}; }

  // Big blocks are mapped on 2 MiB boundaries and asked to use transparent huge pages: first touch of fresh
  // 4 KiB pages costs about 10 µs each on these machines, huge pages cut the number of faults by 512.
  void* raw_allocate(int, std::size_t bytes) override {
    if (bytes >= kHugePage) {
      // Without MAP_NORESERVE, so that the kernel refuses a request that memory and swap cannot back (an
      // OutOfMemoryError here) instead of granting it and killing the process when the pages are touched.
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return nullptr;
      madvise(p, bytes, MADV_HUGEPAGE);
      return p;
    }
    return std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  }

  void raw_free(int, void* ptr, std::size_t bytes) override {
    if (bytes >= kHugePage) {
      munmap(ptr, bytes);
    } else {
      std::free(ptr);
    }
  }

  // Nullptr when the host has no memory left, as in raw_allocate; a zero-byte request still gets a pointer.
  void* allocate_pinned(std::size_t bytes) override {
    if (bytes > std::numeric_limits<std::size_t>::max() - kAlignment) return nullptr;  // rounding up would overflow
    return std::aligned_alloc(kAlignment, std::max<std::size_t>((bytes + kAlignment - 1) / kAlignment, 1) * kAlignment);
  }
  void free_pinned(void* ptr) override { std::free(ptr); }

  void copy(void* dst, Device, const void* src, Device, std::size_t bytes, NativeStream, bool) override {
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }

  // The CPU implements every optional capability but device selection (Note [Required and optional backend
  // capabilities]). Where an override below does nothing, that is the semantics, not a gap: CPU work is
  // synchronous (a kernel has finished when its launch returns), so there is nothing to wait for or to query.

  // CPU streams only need distinct identities (the allocator keys its pools on them); there is nothing to destroy.
  NativeStream create_stream(int) override {
    return reinterpret_cast<NativeStream>(next_stream_.fetch_add(1) * kAlignment);  // NOLINT
  }
  void destroy_stream(int, NativeStream) override {}
  void synchronize_stream(int, NativeStream) override {}
  bool query_stream(int, NativeStream) override { return true; }

  // Events hold the host time at which they were recorded, which is when the work before them finished.
  NativeEvent create_event(int) override { return std::make_unique<CpuEvent>().release(); }
  void destroy_event(int, NativeEvent event) override { std::unique_ptr<CpuEvent>(static_cast<CpuEvent*>(event)); }
  void record_event(int, NativeEvent event, NativeStream) override {
    static_cast<CpuEvent*>(event)->time = std::chrono::steady_clock::now();
  }
  void wait_event(int, NativeStream, NativeEvent) override {}
  void synchronize_event(int, NativeEvent) override {}
  bool query_event(int, NativeEvent) override { return true; }
  float elapsed_ms(int, NativeEvent start, NativeEvent end) override {
    const auto d = static_cast<CpuEvent*>(end)->time - static_cast<CpuEvent*>(start)->time;
    return std::chrono::duration<float, std::milli>(d).count();
  }

  void synchronize_device(int) override {}
  // A CPU device always has an index ("cpu" is cpu:0), so resolve() never needs a current CPU device; this answers
  // for "cpu". set_current_device is left to the default, which throws: it used to be a no-op, which let a caller
  // believe it had made cpu:1 current while current_device() still said 0.
  int current_device() const override { return 0; }
  // Virtual CPU devices share one address space: each reaches every other's memory (Note [Virtual CPU devices]).
  bool can_access_peer(int, int) const override { return true; }

 private:
  std::atomic<std::uintptr_t> next_stream_{1};
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace strata
