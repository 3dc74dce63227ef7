#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "strata/core/device.h"
#include "strata/runtime/backend.h"
#include "strata/runtime/memory_stats.h"

namespace strata {

/// Events on the streams that use a resource's memory, which tell the caching allocator when work queued there has
/// finished (Note [Memory used on other streams]). `device` is concrete and names the device `stream` belongs to.
class StreamEvents {
 public:
  virtual ~StreamEvents() = default;
  virtual NativeEvent create(Device device) = 0;
  virtual void destroy(Device device, NativeEvent event) noexcept = 0;
  virtual void record(Device device, NativeEvent event, NativeStream stream) = 0;
  /// True when the work queued on the stream before the event was recorded has finished.
  virtual bool query(Device device, NativeEvent event) = 0;
  /// Blocks the host until it has.
  virtual void synchronize(Device device, NativeEvent event) = 0;
};

/// Raw memory of one device, as a caching allocator draws on it. Backends adapt to this; tests supply
/// resources with a chosen capacity so that out-of-memory, limits and fragmentation are testable without a GPU.
class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  virtual Device device() const = 0;
  /// Returns nullptr when the device has no memory left for this request.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void free(void* ptr, std::size_t bytes) = 0;
  virtual MemoryInfo memory_info() const = 0;
  /// The events of the streams that may use this memory. The default, none, suits memory whose users have finished
  /// with it whenever they return: recording a stream's use of it then does nothing.
  virtual StreamEvents* stream_events() { return nullptr; }
};

/// The memory resource of a backend's device (used for real devices).
std::unique_ptr<MemoryResource> make_backend_memory_resource(Backend& backend, Device device);

class CachingAllocator;

/// Owns one allocation; returns it to its allocator when destroyed. Movable, not copyable.
class DataPtr {
 public:
  DataPtr() = default;
  DataPtr(void* ptr, std::size_t size, Device device, CachingAllocator* owner, void* block)
      : ptr_(ptr), size_(size), device_(device), owner_(owner), block_(block) {}
  DataPtr(DataPtr&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        device_(other.device_),
        owner_(std::exchange(other.owner_, nullptr)),
        block_(std::exchange(other.block_, nullptr)) {}
  DataPtr& operator=(DataPtr&& other) noexcept;
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  ~DataPtr() { reset(); }

  void* get() const { return ptr_; }
  std::size_t size() const { return size_; }
  Device device() const { return device_; }
  explicit operator bool() const { return ptr_ != nullptr; }
  void reset();
  /// Tells the allocator that work queued on `stream` of `device` uses this memory, so that once freed it is not
  /// handed out again before that work has finished (Note [Memory used on other streams]). The stream the memory
  /// was allocated for needs no record; memory that no caching allocator owns is left alone.
  void record_stream(Device device, NativeStream stream) const;

 private:
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
  Device device_{};
  CachingAllocator* owner_ = nullptr;
  void* block_ = nullptr;
};

// Note [The caching allocator]
// One implementation serves every device: sizes are rounded (512 B granules), requests up to 1 MiB come from a
// small pool carved out of 2 MiB segments, larger ones from a large pool (segments rounded to 2 MiB, or 20 MiB for
// requests under 10 MiB); a cached block bigger than the request is split, and freed neighbours in one segment are
// merged again. Blocks are reused only on the stream they were allocated for (see Note [Why blocks are per
// stream]). When the backend is out of memory, the allocator frees its whole cache of unused segments and tries
// once more, then waits for blocks that other streams still use (Note [Memory used on other streams]) and tries
// again, before throwing OutOfMemoryError. A limit, when set, is checked against reserved bytes before asking
// the backend.
//
// Note [Why blocks are per stream]
// A freed block may still be read by kernels queued on its stream. Reusing it on the same stream is safe because
// the stream runs in order; handing it to another stream would need an event. We keep the simple, safe rule. Work
// that other streams queue on a block is another matter: see Note [Memory used on other streams].
//
// Note [Memory used on other streams]
// The stream a block was allocated for knows nothing of work that other streams queue on it: a tensor handed to a
// side stream, a pinned buffer copied to a GPU without waiting (Tensor::to records the copy's stream itself). Such
// uses are recorded with record_stream, as in PyTorch's CUDACachingAllocator. When a block with uses is freed, the
// allocator records an event on each of those streams and keeps the block out of its pools until every event has
// completed (for ever, if an event cannot be recorded). Completed events are looked for at each allocation and in
// empty_cache, which does not wait: a block still in use stays reserved until a later call. An allocation that would
// otherwise fail waits for every pending event (a counted synchronisation), as a wait beats an out-of-memory error.
// Events come from a per-device pool, taken when a use is recorded (so a bad device fails there, not in a free)
// and returned when they complete. A waiting block counts as reserved and active (a stream still uses it), not as
// allocated. Recording the allocation stream does nothing; so does any record when the resource has no events.
//
// Note [Recently freed blocks]
// Programs free and allocate blocks of the same sizes over and over (every op allocates its result). Merging a
// freed small block into its pool and splitting it off again was half the cost of a tiny op's allocate and free, so
// the last 16 freed small blocks wait on a list, unmerged, and an allocation of the same rounded size on the same
// stream takes the most recent one back. Anything else — another allocation, empty_cache, the largest free block,
// the summary, running out of memory — first returns the waiting blocks to their pools, merged with their free
// neighbours, so it sees the same free memory as if they had been merged when freed. Statistics count a waiting
// block as freed (it is cached, not allocated or active).

class CachingAllocator {
 public:
  explicit CachingAllocator(std::unique_ptr<MemoryResource> resource);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  Device device() const;

  /// Allocates at least `bytes` for use on `stream`. `op` names the operation for the out-of-memory message
  /// (defaults to the op running on this thread, see current_op()). Zero bytes gives an empty DataPtr.
  DataPtr allocate(std::size_t bytes, NativeStream stream = nullptr, const char* op = nullptr);

  /// Returns every cached, unused segment to the backend (not those of blocks that other streams may still use;
  /// see Note [Memory used on other streams]).
  void empty_cache();
  MemoryStats stats() const;
  void reset_peak_stats();
  /// Caps reserved bytes; std::nullopt removes the cap.
  void set_limit(std::optional<std::size_t> bytes);
  std::optional<std::size_t> limit() const;
  /// Size of the largest cached block not in use.
  std::size_t largest_free_block() const;
  /// A readable table of the statistics (as in torch.cuda.memory_summary).
  std::string summary() const;

 private:
  friend class DataPtr;
  void release(void* block);
  void record_stream(void* block, Device device, NativeStream stream);

  struct State;
  std::unique_ptr<State> state_;
};

/// The allocator of a device (created on first use; applies STRATA_MEMORY_LIMIT). Throws DeviceUnavailableError
/// for devices that are absent.
CachingAllocator& allocator(Device device);

/// Allocates on the device's current stream.
DataPtr allocate(Device device, std::size_t bytes);

MemoryStats memory_stats(Device device);
void reset_peak_stats(Device device);
/// Releases cached memory of one device, or of every device that has an allocator when none is given.
void empty_cache(std::optional<Device> device = std::nullopt);
void set_memory_limit(Device device, std::size_t bytes);
/// Limit as a fraction (0, 1] of the device's total memory.
void set_memory_fraction(Device device, double fraction);
void clear_memory_limit(Device device);
std::string memory_summary(Device device);

}  // namespace strata
