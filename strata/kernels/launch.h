#pragma once

// The portable kernel API: a kernel is a callable written once. In a .cpp file it runs on the CPU thread pool; in a
// .cu file (compiled by nvcc, or by hipcc for AMD: Note [One source for NVIDIA and AMD]) the same callable runs as a
// GPU kernel. See docs/architecture.md, "Kernels and device-side asserts", and Note [Device-side asserts] in
// runtime/kernel_assert.h.
//
// Write kernels as `STRATA_KERNEL_LAMBDA(int64_t i) { ... }` so that the GPU compiler compiles them for host and
// device. Kernels whose threads share memory and meet at a barrier are block kernels, launched by launch_block
// (kernels/block_launch.h, included at the end); atomic_add, atomic_min, atomic_max and atomic_cas are in
// kernels/atomics.h.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <source_location>
#include <type_traits>

#include "strata/core/device.h"
#include "strata/core/error.h"
#include "strata/core/macros.h"
#include "strata/kernels/atomics.h"
#include "strata/runtime/backend.h"
#include "strata/runtime/kernel_assert.h"
#include "strata/runtime/parallel.h"

#if defined(STRATA_GPU_COMPILER)
#include "strata/kernels/gpu_vendor.h"
#define STRATA_KERNEL_NS gpu_compiled
#else
#define STRATA_KERNEL_NS host_compiled
#endif

#define STRATA_KERNEL_LAMBDA [=] STRATA_HOST_DEVICE

namespace strata::kernels {

struct Dim3 {
  std::uint32_t x = 1, y = 1, z = 1;
};

/// Where a thread is, as in CUDA: threadIdx, blockIdx, blockDim, gridDim (x only is used by forall).
struct ThreadIndex {
  Dim3 thread, block, block_dim, grid_dim;
  STRATA_HOST_DEVICE int64_t global_x() const { return static_cast<int64_t>(block.x) * block_dim.x + thread.x; }
  STRATA_HOST_DEVICE int64_t grid_stride_x() const { return static_cast<int64_t>(grid_dim.x) * block_dim.x; }
};

/// Where and why a kernel runs: the device and stream, names for messages, and the host call site.
struct LaunchSite {
  LaunchSite(Device device, NativeStream stream, const char* kernel, const char* op,
             std::source_location where = std::source_location::current())
      : device(device), stream(stream), kernel(kernel), op(op), where(where) {}

  Device device;
  NativeStream stream = nullptr;
  const char* kernel = "kernel";
  const char* op = "";
  std::source_location where = std::source_location::current();

  /// The context a kernel captures to use STRATA_KERNEL_ASSERT; `message` says what a failure means.
  KernelAssertContext asserts(const char* message) const {
    slot_ = assert_slot(device, stream);
    return {slot_, register_assert_site(kernel, op, message, where)};
  }
  DeviceAssertSlot* assert_slot_in_use() const { return slot_; }

 private:
  mutable DeviceAssertSlot* slot_ = nullptr;
};

/// Records the first failure in the launch's slot; later failures leave it alone (one report per failure). The slot
/// is marked recorded only after its fields are written (Note [Device-side asserts]).
STRATA_HOST_DEVICE inline void report_assert(const KernelAssertContext& ctx, int64_t index, double value,
                                             double bound) {
  DeviceAssertSlot* slot = ctx.slot;
#if defined(STRATA_DEVICE_PASS)
  if (atomicCAS(&slot->failed, kAssertSlotFree, kAssertSlotWriting) != kAssertSlotFree) return;
#else
  unsigned int expected = kAssertSlotFree;
  if (!__atomic_compare_exchange_n(&slot->failed, &expected, kAssertSlotWriting, false, __ATOMIC_ACQUIRE,
                                   __ATOMIC_RELAXED)) {
    return;
  }
#endif
  slot->site = ctx.site;
  slot->index = index;
  slot->value = value;
  slot->bound = bound;
#if defined(STRATA_DEVICE_PASS)
  __threadfence_system();  // the host reads the fields once it sees the state, over PCIe
  atomicExch(&slot->failed, static_cast<unsigned int>(kAssertSlotRecorded));
#else
  __atomic_store_n(&slot->failed, kAssertSlotRecorded, __ATOMIC_RELEASE);
#endif
}

inline namespace STRATA_KERNEL_NS {

namespace detail {

[[noreturn]] inline void throw_host_only(const LaunchSite& site) {
  STRATA_THROW(Error,
               "kernel '{}' of op '{}' was compiled only for the host ({} is a C++ file), so it cannot run on {}; "
               "compile that file as a .cu file of backends/cuda (nvcc, or hipcc for AMD) to run it on the GPU",
               site.kernel, site.op, site.where.file_name(), site.device);
}

inline void after_cpu_launch(const LaunchSite& site) {
  // Atomic: a kernel of another host thread on the same stream may be recording a failure in this slot right now.
  const DeviceAssertSlot* slot = site.assert_slot_in_use();
  if (slot != nullptr && __atomic_load_n(&slot->failed, __ATOMIC_ACQUIRE) != kAssertSlotFree) {
    check_stream_asserts(site.device, site.stream);
  }
}

#if defined(STRATA_GPU_COMPILER)
template <typename F>
__global__ void forall_kernel(int64_t n, F f) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

template <typename F>
__global__ void launch_kernel(F f) {
  ThreadIndex idx{{threadIdx.x, threadIdx.y, threadIdx.z},
                  {blockIdx.x, blockIdx.y, blockIdx.z},
                  {blockDim.x, blockDim.y, blockDim.z},
                  {gridDim.x, gridDim.y, gridDim.z}};
  f(idx);
}

// A launch goes to the CUDA runtime's current device: the kernel of an op on cuda:1 while cuda:0 is current would run
// on cuda:0 (the legacy default stream is the current device's) or fail (a stream of cuda:1). So the site's device is
// made current for the launch; cudaSetDevice is called only when it differs, and the previous device comes back.
// backends/cuda's RuntimeDeviceGuard does the same around cuBLAS/cuDNN calls; kernels/ may not include backends/
// (docs/architecture.md), hence this twin. One guard per op in the dispatcher (tensor/op_call.h) would serve both.
class LaunchDevice {
 public:
  explicit LaunchDevice(const LaunchSite& site) : index_(site.device.index()) {
    if (!site.device.has_index()) return;
    cudaError_t err = cudaGetDevice(&previous_);
    if (err == cudaSuccess && previous_ != index_) err = cudaSetDevice(index_);
    STRATA_CHECK(err == cudaSuccess, BackendError, "launching kernel '{}' of op '{}': selecting {} failed: {} ({})",
                 site.kernel, site.op, site.device, cudaGetErrorName(err), cudaGetErrorString(err));
  }
  // Going back cannot reasonably fail once selecting worked, and a destructor must not throw.
  ~LaunchDevice() {
    if (previous_ >= 0 && previous_ != index_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  LaunchDevice(const LaunchDevice&) = delete;
  LaunchDevice& operator=(const LaunchDevice&) = delete;

 private:
  int index_;
  int previous_ = -1;
};

inline void after_gpu_launch(const LaunchSite& site) {
  // An error of an earlier kernel that ran asynchronously surfaces here as well, so the message says how to tell.
  const cudaError_t err = cudaGetLastError();
  STRATA_CHECK(err == cudaSuccess, BackendError, "launching kernel '{}' of op '{}' on {} failed: {} ({}){}",
               site.kernel, site.op, site.device, cudaGetErrorName(err), cudaGetErrorString(err),
               launch_blocking() ? ""
                                 : "; the error may come from an earlier kernel: set STRATA_LAUNCH_BLOCKING=1 to "
                                   "report each at its launch");
  if (launch_blocking()) {
    const cudaError_t sync = cudaStreamSynchronize(static_cast<cudaStream_t>(site.stream));
    STRATA_CHECK(sync == cudaSuccess, BackendError, "kernel '{}' of op '{}' on {} failed: {} ({})", site.kernel,
                 site.op, site.device, cudaGetErrorName(sync), cudaGetErrorString(sync));
    check_stream_asserts(site.device, site.stream);
  }
}
#endif

}  // namespace detail

/// Grain below which CPU work runs inline: thread wake-up costs more than a few thousand simple elements.
inline constexpr int64_t kCpuGrain = 32768;

/// Runs f(i) for every i in [0, n) on the site's device.
template <typename F>
void forall(const LaunchSite& site, int64_t n, F f) {
  if (n <= 0) return;
  if (site.device.is_cpu()) {
    // A functor may walk a range of indices itself (cpu_range(begin, end)), paying its index arithmetic once per
    // row rather than once per element.
    const auto run = [&f](int64_t begin, int64_t end) {
      if constexpr (requires { f.cpu_range(begin, end); }) {
        f.cpu_range(begin, end);
      } else {
        for (int64_t i = begin; i < end; ++i) f(i);
      }
    };
    if (n < kCpuGrain) {
      run(0, n);
    } else {
      parallel_for(n, kCpuGrain, run);
    }
    detail::after_cpu_launch(site);
    return;
  }
#if defined(STRATA_GPU_COMPILER)
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65535LL * 8);
  const detail::LaunchDevice on_device(site);
  detail::forall_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(site.stream)>>>(n, f);
  detail::after_gpu_launch(site);
#else
  detail::throw_host_only(site);
#endif
}

/// Runs f(ThreadIndex) for every thread of `grid` x `block`, as a CUDA launch does. On the CPU, blocks run in
/// parallel and the threads of a block one after another (no block-level synchronisation: launch_block has it).
template <typename F>
void launch(const LaunchSite& site, Dim3 grid, Dim3 block, F f) {
  if (site.device.is_cpu()) {
    const int64_t blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z;
    parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        ThreadIndex idx{{}, {}, block, grid};
        idx.block = {static_cast<std::uint32_t>(b % grid.x), static_cast<std::uint32_t>((b / grid.x) % grid.y),
                     static_cast<std::uint32_t>(b / (static_cast<int64_t>(grid.x) * grid.y))};
        for (std::uint32_t z = 0; z < block.z; ++z)
          for (std::uint32_t y = 0; y < block.y; ++y)
            for (std::uint32_t x = 0; x < block.x; ++x) {
              idx.thread = {x, y, z};
              f(idx);
            }
      }
    });
    detail::after_cpu_launch(site);
    return;
  }
#if defined(STRATA_GPU_COMPILER)
  const detail::LaunchDevice on_device(site);
  detail::launch_kernel<<<dim3(grid.x, grid.y, grid.z), dim3(block.x, block.y, block.z), 0,
                          static_cast<cudaStream_t>(site.stream)>>>(f);
  detail::after_gpu_launch(site);
#else
  detail::throw_host_only(site);
#endif
}

}  // namespace STRATA_KERNEL_NS

}  // namespace strata::kernels

/// Inside a kernel: when `cond` fails, records (index, value, bound) for a DeviceAssertError at the next
/// synchronisation. `ctx` comes from LaunchSite::asserts(message).
#define STRATA_KERNEL_ASSERT(ctx, cond, index, value, bound)                                           \
  do {                                                                                                 \
    if (!(cond))                                                                                       \
      ::strata::kernels::report_assert((ctx), static_cast<int64_t>(index), static_cast<double>(value), \
                                       static_cast<double>(bound));                                    \
  } while (false)

// Block kernels need LaunchSite, ThreadIndex and the launch helpers above.
#include "strata/kernels/block_launch.h"  // IWYU pragma: export
