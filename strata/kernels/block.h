#pragma once

// The threads of one GPU block on one CPU thread, for kernels that use a block barrier: the portable kernel API's
// launch_block (kernels/launch.h) and the run-time compiler's CPU dialect (jit/cpu_dialect.h) both run them here.
// Standard C++ only: the CPU dialect includes this header into kernels compiled while a program runs.
//
// Note [Threads of a block on the CPU]
// On a GPU the threads of a block run at once and meet at __syncthreads(). On the CPU a block runs on one thread of
// the pool, and its GPU threads must still really meet: thread 0 may not read what thread 5 writes to shared
// memory before the barrier until thread 5 has written it. A loop over the threads (what launch() does) cannot
// stop in the middle of one. The choices were (1) fibers, one stack per GPU thread switched by hand-written
// assembly or ucontext (whose swapcontext makes a system call per switch), (2) loop fission, cutting the kernel
// at each barrier into loops over the threads with the live variables spilled to arrays (what compilers for GPU
// kernels on CPUs do on their IR, which Strata does not have), and (3) C++20 coroutines: each GPU thread is a
// coroutine, a barrier is a suspension point, and the block's scheduler resumes the threads in turn until each
// has suspended at the barrier or finished. We chose coroutines: the compiler itself keeps the variables that live
// across a barrier (the coroutine frame), a switch costs an indirect call, not a system call, and it is portable
// C++ with no assembly. Frames come from a per-thread arena released after each block, so a block of 256 threads
// costs no call to malloc. Kernels without a barrier do not pay any of this: they run as a plain loop over the
// threads (launch(), and the dialect's kernels in which no __syncthreads() appears). docs/benchmarks.md has the
// cost; docs/architecture.md the decision.

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace strata::kernels {

namespace block_detail {

/// Bump allocation for the coroutine frames of the blocks now running on this thread, released as a stack: run_block
/// takes a mark before it makes its threads and goes back to it when they are gone, so that a block run inside a
/// block thread (a launch from a kernel body) leaves the outer block's frames alone. Chunks are kept for the next
/// block: after the first, a block costs no call to malloc.
class FrameArena {
 public:
  struct Mark {
    std::size_t chunk, used;
  };
  Mark mark() const { return {current_, used_}; }
  /// Frees what was allocated since `m`; nothing allocated since may be used any more.
  void release(Mark m) {
    current_ = m.chunk;
    used_ = m.used;
  }

  void* allocate(std::size_t bytes) {
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;
    if (chunks_.empty()) {
      chunks_.push_back(Chunk::make(bytes));
    } else if (used_ + bytes > chunks_[current_].size) {
      // Chunks after the current one hold nothing live (stack order), so one too small is replaced.
      ++current_;
      used_ = 0;
      if (current_ == chunks_.size()) {
        chunks_.push_back(Chunk::make(bytes));
      } else if (chunks_[current_].size < bytes) {
        chunks_[current_] = Chunk::make(bytes);
      }
    }
    void* p = chunks_[current_].data.get() + used_;
    used_ += bytes;
    return p;
  }

 private:
  // operator new's alignment, all a frame may assume. Not a cache line: the frames of a block all run on one CPU
  // thread, so they cannot share lines falsely, and packing them keeps more of a block's frames in L1.
  static constexpr std::size_t kAlign = __STDCPP_DEFAULT_NEW_ALIGNMENT__;
  static constexpr std::size_t kChunk = 256 * 1024;
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(kAlign)); }
  };
  struct Chunk {
    std::unique_ptr<std::byte[], AlignedDelete> data;
    std::size_t size = 0;
    static Chunk make(std::size_t at_least) {
      const std::size_t size = at_least > kChunk ? at_least : kChunk;
      return {std::unique_ptr<std::byte[], AlignedDelete>(
                  static_cast<std::byte*>(::operator new[](size, std::align_val_t(kAlign)))),
              size};
    }
  };
  std::vector<Chunk> chunks_;
  std::size_t current_ = 0;
  std::size_t used_ = 0;
};

inline FrameArena& frame_arena() {
  thread_local FrameArena arena;
  return arena;
}

struct Runner;

}  // namespace block_detail

/// What a GPU thread of a block is on the CPU when its kernel uses a barrier: a coroutine that starts suspended.
/// Its frame comes from the running thread's FrameArena, so BlockThreads are made inside run_block's `make`.
class BlockThread {
 public:
  struct promise_type {
    BlockThread get_return_object() { return BlockThread(std::coroutine_handle<promise_type>::from_promise(*this)); }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }
    static void* operator new(std::size_t bytes) { return block_detail::frame_arena().allocate(bytes); }
    static void operator delete(void*) noexcept {}  // the arena frees the block's frames together
    std::exception_ptr error;
  };

  BlockThread() = default;
  explicit BlockThread(std::coroutine_handle<promise_type> h) : handle_(h) {}
  BlockThread(BlockThread&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  BlockThread& operator=(BlockThread&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  BlockThread(const BlockThread&) = delete;
  BlockThread& operator=(const BlockThread&) = delete;
  ~BlockThread() {
    if (handle_) handle_.destroy();
  }

  /// Runs the thread to its next barrier or to its end; true while it has more to run.
  bool resume() {
    handle_.resume();
    if (!handle_.done()) return true;
    if (handle_.promise().error) std::rethrow_exception(handle_.promise().error);
    return false;
  }

 private:
  friend struct block_detail::Runner;
  std::coroutine_handle<promise_type> handle_;
};

/// What `co_await` waits on at a block barrier: the thread suspends and the scheduler runs the others.
struct BlockBarrier {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  void await_resume() const noexcept {}
};

namespace block_detail {

/// The threads of one block, in arena memory: each thread's coroutine, and the indices of those not finished.
struct Runner {
  using Handle = std::coroutine_handle<BlockThread::promise_type>;
  FrameArena& arena;
  FrameArena::Mark mark;
  Handle* handles;
  std::int64_t* running;
  std::int64_t made = 0;

  Runner(FrameArena& a, std::int64_t threads)
      : arena(a),
        mark(a.mark()),
        handles(static_cast<Handle*>(a.allocate(sizeof(Handle) * static_cast<std::size_t>(threads)))),
        running(static_cast<std::int64_t*>(a.allocate(sizeof(std::int64_t) * static_cast<std::size_t>(threads)))) {}
  ~Runner() {
    for (std::int64_t t = 0; t < made; ++t) handles[t].destroy();  // the locals' destructors, before the arena
    arena.release(mark);
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  void add(BlockThread thread) {
    handles[made] = std::exchange(thread.handle_, {});
    running[made] = made;
    ++made;
  }
};

}  // namespace block_detail

/// Runs the `threads` GPU threads of one block: make(t) returns thread t's BlockThread (not started), and enter(t)
/// is called before each resumption of thread t (to set the thread's index). Threads run in turn, each to its next
/// barrier, until all have finished. A thread that finishes while others wait at a barrier no longer takes part,
/// as on GPUs since Volta. An exception from a thread ends the block and is rethrown.
template <typename Make, typename Enter>
void run_block(std::int64_t threads, Make&& make, Enter&& enter) {
  if (threads <= 0) return;
  block_detail::Runner block(block_detail::frame_arena(), threads);
  for (std::int64_t t = 0; t < threads; ++t) {
    enter(t);
    block.add(make(t));
  }
  // One sweep per stretch between barriers; the handles are resumed directly (BlockThread::resume without its
  // move-only wrapper), and a thread's error is looked at only once it is done.
  std::int64_t live = threads;
  while (live > 0) {
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < live; ++i) {
      const std::int64_t t = block.running[i];
      const block_detail::Runner::Handle h = block.handles[t];
      enter(t);
      h.resume();
      if (!h.done()) {
        block.running[kept++] = t;
      } else if (h.promise().error) {
        std::rethrow_exception(h.promise().error);
      }
    }
    live = kept;
  }
}

}  // namespace strata::kernels
