// The GPU backend: libstrata_cuda, and libstrata_hip from the same source (Note [One source for NVIDIA and AMD] in
// kernels/gpu_vendor.h), loaded by the registry (Note [Loading a device's plugin] in registry.cpp).

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>

#include "strata/backends/cuda/cuda_check.h"
#include "strata/backends/cuda/library_handles.h"
#include "strata/backends/cuda/version_text.h"
#if STRATA_HAVE_NCCL
#include "strata/backends/cuda/nccl_library.h"
#endif
#include "strata/core/error.h"
#include "strata/core/macros.h"
#include "strata/kernels/gpu_vendor.h"
#include "strata/runtime/backend.h"
#include "strata/runtime/plugin.h"

namespace strata::cuda {

namespace {

// Note [The CUDA default stream is the legacy stream]
// Strata's default stream (NativeStream nullptr) is the *legacy* default stream of each device, named explicitly as
// cudaStreamLegacy so that the choice does not depend on how a file was compiled (nvcc --default-stream
// per-thread would otherwise turn a null stream into the per-thread one). This is what PyTorch does: one default
// stream per device, shared by every host thread, so work that two threads put there runs in one order. Streams
// from create_stream are cudaStreamNonBlocking: they neither wait for nor hold up the legacy stream, so the only
// ordering between streams is the one the user asks for with events (Stream::wait), as docs/architecture.md's
// "Streams and ordering" says. A per-thread default would give each thread its own implicit queue, which hides
// ordering bugs between threads; we prefer the explicit model. to_cuda_stream (library_handles.h) applies it.

cudaEvent_t to_cuda_event(NativeEvent event) { return static_cast<cudaEvent_t>(event); }

// At process exit the runtime may already be unloading; device memory goes with the process then.
bool runtime_unloading(cudaError_t error) {
  if (error != cudaErrorCudartUnloading) return false;
  (void)cudaGetLastError();
  return true;
}

Device gpu(int index) { return Device(kGpuType, index); }

/// The runtime's and driver's version numbers as this vendor writes them (version_text.h).
std::string gpu_version_text(int version) {
  return kGpuType == DeviceType::HIP ? hip_version_text(version) : cuda_version_text(version);
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int count) : count_(count) {
    STRATA_CUDA_CHECK(cudaDriverGetVersion(&driver_version_),
                      fmt::format("reading the {} driver version", kGpuRuntime));
    STRATA_CUDA_CHECK(cudaRuntimeGetVersion(&runtime_version_),
                      fmt::format("reading the {} runtime version", kGpuRuntime));
  }

  DeviceType type() const override { return kGpuType; }
  int device_count() const override { return count_; }

  DeviceProperties properties(int index) const override {
    check_index(index, "properties");
    cudaDeviceProp prop{};
    STRATA_CUDA_CHECK(cudaGetDeviceProperties(&prop, index), fmt::format("properties of {}", gpu(index)));
    DeviceProperties p;
    p.name = prop.name;
    p.total_memory = prop.totalGlobalMem;
    p.compute_capability_major = prop.major;
    p.compute_capability_minor = prop.minor;
    p.multiprocessor_count = prop.multiProcessorCount;
    p.driver_version = driver_version_;
    p.runtime_version = runtime_version_;
    return p;
  }

  MemoryInfo memory_info(int index) const override {
    check_index(index, "memory_info");
    RuntimeDeviceGuard guard(index);
    MemoryInfo info;
    STRATA_CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total), fmt::format("memory_info of {}", gpu(index)));
    return info;
  }

  void* raw_allocate(int index, std::size_t bytes) override {
    check_index(index, "raw_allocate");
    RuntimeDeviceGuard guard(index);
    void* ptr = nullptr;
    // A zero-byte request still gets a distinct pointer, as on the CPU; nullptr means "out of memory".
    const cudaError_t error = cudaMalloc(&ptr, std::max<std::size_t>(bytes, 1));
    if (error == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // the allocator reports the OOM (with context) and may retry after freeing
      return nullptr;
    }
    STRATA_CUDA_CHECK(error, fmt::format("raw_allocate of {} bytes on {}", bytes, gpu(index)));
    return ptr;
  }

  void raw_free(int index, void* ptr, std::size_t bytes) override {
    if (ptr == nullptr) return;
    int current = 0;
    if (runtime_unloading(cudaGetDevice(&current))) return;
    // cudaFree runs in the current device's context: unguarded, a free from a thread whose current device is another
    // would create that device's context (hundreds of MiB) if it had none yet.
    RuntimeDeviceGuard guard(index);
    const cudaError_t error = cudaFree(ptr);
    if (runtime_unloading(error)) return;
    STRATA_CUDA_CHECK(error, fmt::format("raw_free of {} bytes on {}", bytes, gpu(index)));
  }

  void* allocate_pinned(std::size_t bytes) override {
    void* ptr = nullptr;
    // Portable: the pages are pinned for every device, not only for the current one. As in raw_allocate, a
    // zero-byte request still gets a distinct pointer; nullptr means "out of memory".
    const cudaError_t error = cudaHostAlloc(&ptr, std::max<std::size_t>(bytes, 1), cudaHostAllocPortable);
    if (error == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // the pinned allocator releases its cache and retries, then reports the OOM
      return nullptr;
    }
    STRATA_CUDA_CHECK(error, fmt::format("allocate_pinned of {} bytes", bytes));
    return ptr;
  }

  void free_pinned(void* ptr) override {
    if (ptr != nullptr && cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
  }

  bool supports_pinned_memory() const override { return true; }

  std::string version_text(int version) const override { return gpu_version_text(version); }

  // The stream belongs to the device that does the copy: the GPU side, or for a peer copy the source device.
  void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes, NativeStream stream,
            bool blocking) override {
    STRATA_CHECK(dst_device.type() == kGpuType || src_device.type() == kGpuType, InvalidArgumentError,
                 "copy: the {} backend was asked to copy {} -> {}, but neither side is one of its devices", kGpuRuntime,
                 src_device, dst_device);
    if (bytes == 0) return;
    const int src_index = src_device.type() == kGpuType ? concrete_index(src_device, "copy") : -1;
    const int dst_index = dst_device.type() == kGpuType ? concrete_index(dst_device, "copy") : -1;
    const int runs_on = src_index >= 0 ? src_index : dst_index;
    RuntimeDeviceGuard guard(runs_on);
    const cudaStream_t s = to_cuda_stream(stream);
    const auto what = [&] { return fmt::format("copy of {} bytes {} -> {}", bytes, src_device, dst_device); };
    if (src_index >= 0 && dst_index >= 0 && src_index != dst_index) {
      STRATA_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_index, src, src_index, bytes, s), what());
    } else {
      const cudaMemcpyKind kind = src_index < 0   ? cudaMemcpyHostToDevice
                                  : dst_index < 0 ? cudaMemcpyDeviceToHost
                                                  : cudaMemcpyDeviceToDevice;
      STRATA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s), what());
    }
    if (blocking) STRATA_CUDA_CHECK(cudaStreamSynchronize(s), what());
  }

  NativeStream create_stream(int index) override {
    check_index(index, "create_stream");
    RuntimeDeviceGuard guard(index);
    cudaStream_t stream = nullptr;
    STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                      fmt::format("create_stream on {}", gpu(index)));
    return stream;
  }

  // Destroying is called from destructors: it must not throw (a stream or event knows its own device).
  void destroy_stream(int, NativeStream stream) override {
    if (stream != nullptr && cudaStreamDestroy(to_cuda_stream(stream)) != cudaSuccess) (void)cudaGetLastError();
  }

  void synchronize_stream(int index, NativeStream stream) override {
    check_index(index, "synchronize_stream");
    RuntimeDeviceGuard guard(index);
    STRATA_CUDA_CHECK(cudaStreamSynchronize(to_cuda_stream(stream)),
                      fmt::format("synchronize_stream on {}", gpu(index)));
  }

  bool query_stream(int index, NativeStream stream) override {
    check_index(index, "query_stream");
    RuntimeDeviceGuard guard(index);
    return finished(cudaStreamQuery(to_cuda_stream(stream)), "query_stream", index);
  }

  NativeEvent create_event(int index) override {
    check_index(index, "create_event");
    RuntimeDeviceGuard guard(index);
    cudaEvent_t event = nullptr;
    // cudaEventDefault keeps timing on, so any event can be used with elapsed_ms.
    STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDefault),
                      fmt::format("create_event on {}", gpu(index)));
    return event;
  }

  void destroy_event(int, NativeEvent event) override {
    if (event != nullptr && cudaEventDestroy(to_cuda_event(event)) != cudaSuccess) (void)cudaGetLastError();
  }

  void record_event(int index, NativeEvent event, NativeStream stream) override {
    check_index(index, "record_event");
    RuntimeDeviceGuard guard(index);
    STRATA_CUDA_CHECK(cudaEventRecord(to_cuda_event(event), to_cuda_stream(stream)),
                      fmt::format("record_event on {}", gpu(index)));
  }

  void wait_event(int index, NativeStream stream, NativeEvent event) override {
    check_index(index, "wait_event");
    RuntimeDeviceGuard guard(index);
    STRATA_CUDA_CHECK(cudaStreamWaitEvent(to_cuda_stream(stream), to_cuda_event(event), 0),
                      fmt::format("wait_event on {}", gpu(index)));
  }

  void synchronize_event(int index, NativeEvent event) override {
    check_index(index, "synchronize_event");
    STRATA_CUDA_CHECK(cudaEventSynchronize(to_cuda_event(event)), fmt::format("synchronize_event on {}", gpu(index)));
  }

  bool query_event(int index, NativeEvent event) override {
    check_index(index, "query_event");
    return finished(cudaEventQuery(to_cuda_event(event)), "query_event", index);
  }

  float elapsed_ms(int index, NativeEvent start, NativeEvent end) override {
    check_index(index, "elapsed_ms");
    float ms = 0;
    STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms, to_cuda_event(start), to_cuda_event(end)),
                      fmt::format("elapsed_ms on {} (both events must be recorded and completed)", gpu(index)));
    return ms;
  }

  void synchronize_device(int index) override {
    check_index(index, "synchronize_device");
    RuntimeDeviceGuard guard(index);
    STRATA_CUDA_CHECK(cudaDeviceSynchronize(), fmt::format("synchronize_device on {}", gpu(index)));
  }

  int current_device() const override {
    int index = 0;
    STRATA_CUDA_CHECK(cudaGetDevice(&index), "current_device");
    return index;
  }

  void set_current_device(int index) override {
    check_index(index, "set_current_device");
    STRATA_CUDA_CHECK(cudaSetDevice(index), fmt::format("set_current_device to {}", gpu(index)));
  }

  bool can_access_peer(int index, int peer) const override {
    check_index(index, "can_access_peer");
    check_index(peer, "can_access_peer");
    if (index == peer) return true;  // CUDA answers 0 for a device and itself; its own memory is reachable
    int can = 0;
    STRATA_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, index, peer),
                      fmt::format("can_access_peer {} -> {}", gpu(index), gpu(peer)));
    return can != 0;
  }

 private:
  void check_index(int index, const char* op) const {
    STRATA_CHECK(index >= 0 && index < count_, DeviceUnavailableError,
                 "{}: device {} is unavailable: this machine has {} {} device(s) (valid indices 0..{})", op, gpu(index),
                 count_, kGpuRuntime, count_ - 1);
  }

  // "cuda" without an index means the current device (callers normally resolve it first).
  int concrete_index(Device device, const char* op) const {
    const int index = device.has_index() ? device.index() : current_device();
    check_index(index, op);
    return index;
  }

  // cudaErrorNotReady from a query is an answer, not a failure.
  static bool finished(cudaError_t error, const char* op, int index) {
    if (error == cudaSuccess) return true;
    if (error == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    STRATA_CUDA_CHECK(error, fmt::format("{} on {}", op, gpu(index)));
    return false;
  }

  int count_;
  int driver_version_ = 0;
  int runtime_version_ = 0;
};

// One line for unavailable_reason() when cudaGetDeviceCount fails: usually no driver, or one too old.
std::string driver_failure_reason(cudaError_t error) {
  int driver = 0;
  int runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaGetLastError();
  std::string driver_text;
  if (kGpuType == DeviceType::HIP) {
    // HIP reports its own version as the driver's, driver or not; ROCm reaches AMD GPUs through /dev/kfd.
    std::error_code ec;
    driver_text = std::filesystem::exists("/dev/kfd", ec) ? "/dev/kfd is present"
                                                          : "no AMD GPU driver is loaded (/dev/kfd is missing)";
  } else {
    driver_text = driver == 0 ? fmt::format("no {} driver was found", kGpuRuntime)
                              : fmt::format("the driver supports {} {}", kGpuRuntime, gpu_version_text(driver));
  }
  const std::string name = cudaGetErrorName(error), text = cudaGetErrorString(error);
  return fmt::format("{} failed: {}{}; {}, this plugin was built for the {} {} runtime",
                     kGpuType == DeviceType::HIP ? "hipGetDeviceCount" : "cudaGetDeviceCount", name,
                     text == name ? "" : fmt::format(" ({})", text), driver_text, kGpuRuntime,
                     gpu_version_text(runtime));
}

}  // namespace

}  // namespace strata::cuda

// The plugin's ABI version (Note [The plugin ABI version] in runtime/plugin.h), checked before the entry point is
// called.
STRATA_DEFINE_PLUGIN_ABI_VERSION()

/// The plugin's entry point (runtime/plugin.h): a new CUDA (or HIP) backend, or nullptr with a one-line reason when the
/// driver is missing or too old or no GPU is visible. Never throws: the caller is C code as far as the ABI goes.
extern "C" STRATA_EXPORT strata::Backend* strata_create_backend(std::string* why_not) {
  std::string reason;
  try {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      reason = strata::cuda::driver_failure_reason(error);
    } else if (count == 0) {
      const char* variable =
          strata::kGpuType == strata::DeviceType::HIP ? "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES";
      const char* visible = std::getenv(variable);
      reason = visible == nullptr
                   ? fmt::format("the {} driver reports no GPU", strata::kGpuRuntime)
                   : fmt::format("the {} driver reports no GPU ({}='{}')", strata::kGpuRuntime, variable, visible);
    } else {
      auto backend = std::make_unique<strata::cuda::CudaBackend>(count);
#if STRATA_HAVE_NCCL
      strata::cuda::register_nccl();
#endif
      return backend.release();
    }
  } catch (const std::exception& e) {
    reason = e.what();
  }
  if (why_not != nullptr) *why_not = reason;
  return nullptr;
}
