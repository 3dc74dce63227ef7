#pragma once

// Block kernels: kernels whose threads share memory within their block and meet at a barrier, written once for the
// CPU (.cpp files) and the GPU (.cu files). launch.h includes this header.
//
// Note [Block kernels]
// A block kernel is written with four macros and launched with launch_block:
//
//   kernels::launch_block(site, {blocks}, {256}, /*dynamic_shared_bytes=*/0,
//                         STRATA_BLOCK_KERNEL(ctx) {
//                           STRATA_SHARED(ctx, float[256], partial);     // per-block static array
//                           const std::uint32_t t = ctx.idx.thread.x;
//                           partial[t] = in[ctx.idx.global_x()];
//                           STRATA_SYNCTHREADS();
//                           if (t != 0) STRATA_BLOCK_RETURN();           // a thread may leave early
//                           ...
//                         });
//
// - STRATA_BLOCK_KERNEL(ctx) starts a lambda that captures by value and takes the BlockContext `ctx`: the thread's
//   ThreadIndex (ctx.idx), its block's dynamic shared memory (ctx.dynamic_shared<T>(), of the size given to
//   launch_block, ctx.dynamic_shared_bytes()).
// - STRATA_SHARED(ctx, Type, name) declares `name`, a reference to the block's one object of Type (an array type
//   such as float[16][16] is the usual case): `__shared__` on the GPU, a slice of a per-block buffer on the CPU that
//   every thread of the block finds by the declaration's site. Its content is undefined when the block starts, as
//   on GPUs; Type must be trivial. At most 48 KiB in all, as for static __shared__ in CUDA: more throws on the CPU
//   (nvcc refuses it when compiling); dynamic shared memory has no such limit on the CPU.
// - STRATA_SYNCTHREADS() is the block barrier: __syncthreads() on the GPU, `co_await BlockBarrier{}` on the CPU.
//   As on GPUs, every thread that has not finished must reach the same barrier; a thread that finished no longer
//   counts (Volta and later).
// - STRATA_BLOCK_RETURN() leaves the kernel (a plain `return` is not allowed in a coroutine).
//
// Why macros: on the CPU the kernel body is a C++20 coroutine (Note [Threads of a block on the CPU] in block.h), so
// it must return BlockThread and use co_await and co_return, which device code cannot; on the GPU it is a
// __device__ lambda calling __syncthreads(). The macros pick one by the compiler of the file (STRATA_GPU_COMPILER),
// not by its pass: in a .cu file the lambda is __device__ only, so nvcc's and hipcc's host passes never see a
// coroutine. The price is that a block kernel compiled in a .cu file cannot run on the CPU; launch_block there
// throws and says so. Kernels shared by both (backends/portable) are compiled twice anyway, once in a .cpp file for
// the CPU and once in a .cu file for the GPU. On the CPU the body must contain at least one STRATA_SYNCTHREADS() or
// STRATA_BLOCK_RETURN(): else it is not a coroutine, and flowing off its end is undefined behaviour that g++ and
// clang only warn about (-Wreturn-type: "no return statement in function returning non-void"). A kernel without a
// barrier is better written for launch() anyway, which runs it as a plain loop.
//
// The closure lives in launch_block's frame for the whole launch: the coroutines of the CPU refer to it (a
// coroutine lambda's captures are not copied into its frame), and the BlockContext is taken by value so that each
// thread's copy lives in its own frame.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "strata/kernels/launch.h"
#if !defined(STRATA_GPU_COMPILER)
#include "strata/kernels/block.h"
#endif

namespace strata::kernels {

/// The most bytes of STRATA_SHARED a block kernel may declare: CUDA's limit on static __shared__ memory.
inline constexpr std::size_t kStaticSharedLimit = 48 * 1024;
/// The most threads a block may have, on every GPU Strata runs on.
inline constexpr std::int64_t kMaxBlockThreads = 1024;

namespace block_detail {
class CpuShared;
}

/// What a thread of a block kernel gets: where it is, and its block's shared memory.
class BlockContext {
 public:
  STRATA_HOST_DEVICE BlockContext(const ThreadIndex& index, void* dynamic, std::size_t dynamic_bytes,
                                  block_detail::CpuShared* cpu)
      : idx(index), dynamic_(dynamic), dynamic_bytes_(dynamic_bytes), cpu_(cpu) {}

  /// threadIdx, blockIdx, blockDim and gridDim.
  ThreadIndex idx;

  /// The thread's rank in its block, x fastest (as CUDA numbers a block's threads).
  STRATA_HOST_DEVICE std::uint32_t thread_rank() const {
    return idx.thread.x + idx.block_dim.x * (idx.thread.y + idx.block_dim.y * idx.thread.z);
  }
  /// How many threads the block has.
  STRATA_HOST_DEVICE std::uint32_t block_threads() const { return idx.block_dim.x * idx.block_dim.y * idx.block_dim.z; }
  /// The block's dynamic shared memory, dynamic_shared_bytes() long and aligned for any T up to 16 bytes (64 on the
  /// CPU); null on the CPU when the launch asked for none.
  template <typename T>
  STRATA_HOST_DEVICE T* dynamic_shared() const {
    return static_cast<T*>(dynamic_);
  }
  STRATA_HOST_DEVICE std::size_t dynamic_shared_bytes() const { return dynamic_bytes_; }

  /// On the CPU, what STRATA_SHARED expands to: the block's object of type T declared at `site`.
  template <typename T>
  T& static_shared(const void* site, const char* name) const;

 private:
  void* dynamic_;
  std::size_t dynamic_bytes_;
  block_detail::CpuShared* cpu_;  // null on the GPU
};

namespace block_detail {

// The CPU's shared memory of the blocks that one chunk of a launch runs one after another: the dynamic buffer, and
// the static one with the offset of each STRATA_SHARED site the block's threads declared so far.
class CpuShared {
 public:
  CpuShared(const LaunchSite& site, std::size_t dynamic_bytes)
      : site_(site), dynamic_(dynamic_bytes == 0 ? nullptr : allocate(dynamic_bytes)) {}

  void* dynamic() const { return dynamic_.get(); }

  /// A new block: its sites get offsets anew (in the order its threads meet them, the same in every block).
  void begin_block() {
    entries_.clear();
    static_used_ = 0;
  }

  void* static_array(const void* site, std::size_t bytes, std::size_t align, const char* name) {
    for (const Entry& e : entries_) {
      if (e.site == site) return static_.get() + e.offset;
    }
    const std::size_t offset = (static_used_ + align - 1) / align * align;
    STRATA_CHECK(offset + bytes <= kStaticSharedLimit, InvalidArgumentError,
                 "kernel '{}' of op '{}' declares more static shared memory than a GPU kernel may: '{}' of {} bytes "
                 "after {} bytes already takes it past {} bytes (48 KiB); put large arrays in dynamic shared memory "
                 "(launch_block's dynamic_shared_bytes)",
                 site_.kernel, site_.op, name, bytes, static_used_, kStaticSharedLimit);
    if (!static_) static_ = allocate(kStaticSharedLimit);
    entries_.push_back({site, offset});
    static_used_ = offset + bytes;
    return static_.get() + offset;
  }

 private:
  static constexpr std::size_t kAlign = 64;
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(kAlign)); }
  };
  using Buffer = std::unique_ptr<std::byte[], AlignedDelete>;
  static Buffer allocate(std::size_t bytes) {
    return Buffer(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t(kAlign))));
  }
  struct Entry {
    const void* site;
    std::size_t offset;
  };

  const LaunchSite& site_;
  Buffer dynamic_;
  Buffer static_;  // kStaticSharedLimit bytes, allocated at the first STRATA_SHARED
  std::vector<Entry> entries_;
  std::size_t static_used_ = 0;
};

}  // namespace block_detail

template <typename T>
T& BlockContext::static_shared(const void* site, const char* name) const {
  using Element = std::remove_all_extents_t<T>;
  static_assert(std::is_trivially_default_constructible_v<Element> && std::is_trivially_destructible_v<Element>,
                "STRATA_SHARED needs a trivial type: shared memory is neither constructed nor destroyed");
  return *std::launder(static_cast<T*>(cpu_->static_array(site, sizeof(T), alignof(T), name)));
}

inline namespace STRATA_KERNEL_NS {

namespace detail {

inline void check_block_shape(const LaunchSite& site, Dim3 block) {
  const std::int64_t threads = static_cast<std::int64_t>(block.x) * block.y * block.z;
  STRATA_CHECK(threads >= 1 && threads <= kMaxBlockThreads, InvalidArgumentError,
               "kernel '{}' of op '{}': a block of {}x{}x{} threads is not possible; a block has 1 to {} threads",
               site.kernel, site.op, block.x, block.y, block.z, kMaxBlockThreads);
}

#if defined(STRATA_GPU_COMPILER)
[[noreturn]] inline void throw_block_kernel_gpu_only(const LaunchSite& site) {
  STRATA_THROW(Error,
               "block kernel '{}' of op '{}' was compiled for the GPU only ({} is a GPU file, where "
               "STRATA_BLOCK_KERNEL makes a __device__ lambda), so it cannot run on {}; launch it on the CPU from a "
               "C++ file, where it becomes a coroutine (Note [Block kernels] in kernels/block_launch.h)",
               site.kernel, site.op, site.where.file_name(), site.device);
}

template <typename F>
__global__ void block_kernel(F f, std::size_t dynamic_bytes) {
  extern __shared__ __attribute__((aligned(16))) unsigned char strata_dynamic_shared[];
  f(BlockContext(ThreadIndex{{threadIdx.x, threadIdx.y, threadIdx.z},
                             {blockIdx.x, blockIdx.y, blockIdx.z},
                             {blockDim.x, blockDim.y, blockDim.z},
                             {gridDim.x, gridDim.y, gridDim.z}},
                 strata_dynamic_shared, dynamic_bytes, nullptr));
}
#else
template <typename F>
void run_blocks_on_cpu(const LaunchSite& site, Dim3 grid, Dim3 block, std::size_t dynamic_bytes, const F& kernel) {
  const std::int64_t blocks = static_cast<std::int64_t>(grid.x) * grid.y * grid.z;
  const std::int64_t threads = static_cast<std::int64_t>(block.x) * block.y * block.z;  // at most 1024
  const bool flat = block.y == 1 && block.z == 1;
  // One block per task: a block is hundreds of threads' work, and blocks may differ in cost.
  parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    block_detail::CpuShared shared(site, dynamic_bytes);
    for (int64_t b = begin; b < end; ++b) {
      shared.begin_block();
      ThreadIndex idx{{}, {}, block, grid};
      idx.block = {static_cast<std::uint32_t>(b % grid.x), static_cast<std::uint32_t>((b / grid.x) % grid.y),
                   static_cast<std::uint32_t>(b / (static_cast<int64_t>(grid.x) * grid.y))};
      run_block(
          threads,
          [&](std::int64_t t) {
            // Without a division where the block is one-dimensional: a 64-bit division costs as much as the rest of
            // making the thread.
            if (flat) {
              idx.thread.x = static_cast<std::uint32_t>(t);
            } else {
              const auto r = static_cast<std::uint32_t>(t);
              idx.thread = {r % block.x, (r / block.x) % block.y, r / (block.x * block.y)};
            }
            return kernel(BlockContext(idx, shared.dynamic(), dynamic_bytes, &shared));
          },
          [](std::int64_t) {});
    }
  });
}
#endif

}  // namespace detail

/// Runs `kernel`, written as STRATA_BLOCK_KERNEL(ctx) { ... } (Note [Block kernels]), for every thread of `grid` x
/// `block`, with `dynamic_shared_bytes` of dynamic shared memory per block. On the CPU, blocks run in parallel and
/// the threads of a block in turn between barriers (Note [Threads of a block on the CPU] in block.h); the first
/// exception a thread throws ends the launch and reaches the caller. An empty grid runs nothing.
template <typename F>
void launch_block(const LaunchSite& site, Dim3 grid, Dim3 block, std::size_t dynamic_shared_bytes, F kernel) {
  detail::check_block_shape(site, block);
  if (static_cast<std::int64_t>(grid.x) * grid.y * grid.z == 0) return;
  if (site.device.is_cpu()) {
#if defined(STRATA_GPU_COMPILER)
    detail::throw_block_kernel_gpu_only(site);
#else
    static_assert(std::is_same_v<std::invoke_result_t<const F&, BlockContext>, BlockThread>,
                  "write block kernels as STRATA_BLOCK_KERNEL(ctx) { ... }: on the CPU each thread is a coroutine "
                  "returning BlockThread");
    detail::run_blocks_on_cpu(site, grid, block, dynamic_shared_bytes, kernel);
    detail::after_cpu_launch(site);
    return;
#endif
  }
#if defined(STRATA_GPU_COMPILER)
  const detail::LaunchDevice on_device(site);
#if !defined(STRATA_GPU_HIP)
  // Above 48 KiB a CUDA kernel must opt in to more dynamic shared memory (up to 227 KiB on sm_90); AMD's 64 KiB
  // need no opt-in.
  if (dynamic_shared_bytes > kStaticSharedLimit) {
    const cudaError_t err = cudaFuncSetAttribute(detail::block_kernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(dynamic_shared_bytes));
    STRATA_CHECK(err == cudaSuccess, BackendError,
                 "kernel '{}' of op '{}' on {}: {} bytes of dynamic shared memory are more than the device allows: "
                 "{} ({})",
                 site.kernel, site.op, site.device, dynamic_shared_bytes, cudaGetErrorName(err),
                 cudaGetErrorString(err));
  }
#endif
  detail::block_kernel<<<dim3(grid.x, grid.y, grid.z), dim3(block.x, block.y, block.z), dynamic_shared_bytes,
                         static_cast<cudaStream_t>(site.stream)>>>(kernel, dynamic_shared_bytes);
  detail::after_gpu_launch(site);
#else
  detail::throw_host_only(site);
#endif
}

}  // namespace STRATA_KERNEL_NS

}  // namespace strata::kernels

#if defined(STRATA_GPU_COMPILER)
#define STRATA_BLOCK_KERNEL(ctx) [=] __device__(::strata::kernels::BlockContext ctx)
#define STRATA_SYNCTHREADS() __syncthreads()
#define STRATA_BLOCK_RETURN() return
#define STRATA_SHARED(ctx, Type, name) __shared__ ::std::type_identity_t<Type> name
#else
#define STRATA_BLOCK_KERNEL(ctx) [=](::strata::kernels::BlockContext ctx) -> ::strata::kernels::BlockThread
#define STRATA_SYNCTHREADS() \
  co_await ::strata::kernels::BlockBarrier {}
#define STRATA_BLOCK_RETURN() co_return
// The site's identity is the address of a static of its own: the same for every thread of every block.
#define STRATA_SHARED(ctx, Type, name)   \
  static char strata_shared_site_##name; \
  ::std::type_identity_t<Type>& name =   \
      (ctx).static_shared<::std::type_identity_t<Type>>(&strata_shared_site_##name, #name)
#endif
