// The caching allocator: see Note [The caching allocator] and Note [Why blocks are per stream] in allocator.h; the
// record of blocks used on other streams is in stream_uses.cpp.
#include "strata/runtime/allocator.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <new>
#include <set>
#include <unordered_set>
#include <utility>
#include <vector>

#include "strata/core/error.h"
#include "strata/runtime/memory_report.h"
#include "strata/runtime/op_scope.h"
#include "strata/runtime/plugin.h"
#include "strata/runtime/profiler.h"
#include "strata/runtime/stream_uses.h"
#include "strata/runtime/thread_cache.h"
#include "strata/runtime/transfer.h"

namespace strata {

namespace {

constexpr std::size_t kMinBlockSize = 512;                     // every size is rounded up to a multiple of this
constexpr std::size_t kSmallSize = std::size_t{1} << 20;       // requests up to 1 MiB use the small pool
constexpr std::size_t kSmallBuffer = std::size_t{2} << 20;     // segments of the small pool
constexpr std::size_t kLargeBuffer = std::size_t{20} << 20;    // segments for large requests under kMinLargeAlloc
constexpr std::size_t kMinLargeAlloc = std::size_t{10} << 20;  // from here segments fit the request
constexpr std::size_t kRoundLarge = std::size_t{2} << 20;      // which are rounded to 2 MiB
// Larger requests cannot be rounded without overflow; no device has that much memory anyway.
constexpr std::size_t kMaxRequest = std::numeric_limits<std::size_t>::max() / 2;

std::size_t round_up(std::size_t n, std::size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

std::size_t rounded_size(std::size_t bytes) { return round_up(bytes, kMinBlockSize); }

std::size_t segment_size(std::size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return round_up(size, kRoundLarge);
}

struct Block;

// Cached blocks are ordered by stream first, so that a lookup never leaves its stream, then by size (best fit).
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const;
};
// Blocks and pool nodes are made and dropped by every split and merge (Note [Small objects are recycled per thread]).
using Pool = std::set<Block*, BlockOrder, ThreadCacheAllocator<Block*>>;

// A piece of a segment. The blocks of one segment form a list in address order; the first block of a segment
// (prev == nullptr) is never deleted while the segment lives, because merging keeps the lower block.
struct Block {
  void* ptr = nullptr;
  std::size_t size = 0;
  NativeStream stream = nullptr;
  Pool* pool = nullptr;
  std::size_t requested = 0;  // while allocated: the bytes the caller asked for
  bool cached = false;        // in its pool, where a freed neighbour merges with it
  Block* prev = nullptr;
  Block* next = nullptr;
  std::vector<StreamUse> stream_uses;  // while allocated: other streams it is used on
};

bool BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return std::less<>()(a->stream, b->stream);
  if (a->size != b->size) return a->size < b->size;
  return std::less<>()(a->ptr, b->ptr);
}

void add(Stat& stat, int64_t delta) {
  stat.current += delta;
  if (delta > 0) stat.total += delta;
  stat.peak = std::max(stat.peak, stat.current);
}

int64_t as_signed(std::size_t n) { return static_cast<int64_t>(n); }

class BackendMemoryResource final : public MemoryResource {
 public:
  BackendMemoryResource(Backend& backend, Device device)
      : backend_(backend), device_(device), index_(backend_index(device)) {}
  Device device() const override { return device_; }
  void* allocate(std::size_t bytes) override { return backend_.raw_allocate(index_, bytes); }
  void free(void* ptr, std::size_t bytes) override { backend_.raw_free(index_, ptr, bytes); }
  MemoryInfo memory_info() const override { return backend_.memory_info(index_); }
  StreamEvents* stream_events() override { return &backend_stream_events(); }

 private:
  Backend& backend_;
  Device device_;
  int index_;
};

}  // namespace

std::unique_ptr<MemoryResource> make_backend_memory_resource(Backend& backend, Device device) {
  return std::make_unique<BackendMemoryResource>(backend, device);
}

struct CachingAllocator::State {
  std::unique_ptr<MemoryResource> resource;
  Device device;
  mutable std::mutex mutex;
  Pool small_pool;
  Pool large_pool;
  std::unordered_set<Block*> segments;  // the first block of every segment
  // Freed small blocks not yet in their pool, oldest first (Note [Recently freed blocks]).
  std::array<Block*, 16> recent{};
  std::size_t recent_count = 0;
  // Freed blocks that other streams may still use; null when the resource has no events (Note [Memory used on
  // other streams]). Declared after `resource`, whose events it destroys when it goes.
  std::unique_ptr<PendingFrees> pending;
  MemoryStats stats;

  static Block* new_block() { return new (ThreadCacheAllocator<Block>().allocate(1)) Block{}; }
  static void delete_block(Block* block) {
    block->~Block();
    ThreadCacheAllocator<Block>().deallocate(block, 1);
  }

  // The best-fitting cached block for `size` on `stream`, taken out of its pool; nullptr when none fits.
  Block* take_cached(Pool& pool, NativeStream stream, std::size_t size) {
    Block key;
    key.stream = stream;
    key.size = size;
    const auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    pool.erase(it);
    block->cached = false;
    return block;
  }

  // Cuts `block` down to `size` when the rest is worth keeping as a block of its own: any rest in the small pool,
  // more than 1 MiB in the large pool (smaller rests stay with the block, counted as active but not allocated).
  void split(Block* block, std::size_t size) {
    const std::size_t rest_size = block->size - size;
    const bool worth_it = block->pool == &small_pool ? rest_size >= kMinBlockSize : rest_size > kSmallSize;
    if (!worth_it) return;
    Block* rest = new_block();
    rest->ptr = static_cast<char*>(block->ptr) + size;
    rest->size = rest_size;
    rest->stream = block->stream;
    rest->pool = block->pool;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    block->pool->insert(rest);
    rest->cached = true;
  }

  // Merges the free block `block` with cached neighbours, keeping the lower block, and puts the result in its pool.
  void free_block(Block* block) {
    if (Block* prev = block->prev; prev != nullptr && prev->cached) {
      prev->pool->erase(prev);
      absorb_next(prev);
      block = prev;
    }
    if (Block* next = block->next; next != nullptr && next->cached) {
      next->pool->erase(next);
      absorb_next(block);
    }
    block->pool->insert(block);
    block->cached = true;
  }

  // A block of `size` freed recently on `stream`, taken off the list; nullptr when there is none.
  Block* take_recent(NativeStream stream, std::size_t size) {
    for (std::size_t i = recent_count; i-- > 0;) {
      Block* block = recent[i];
      if (block->size == size && block->stream == stream) {
        std::copy(recent.begin() + i + 1, recent.begin() + recent_count, recent.begin() + i);
        --recent_count;
        return block;
      }
    }
    return nullptr;
  }

  // Keeps the freed small block `block` on the list of recent ones; the oldest goes to its pool when it is full.
  void keep_recent(Block* block) {
    if (recent_count == recent.size()) {
      free_block(recent[0]);
      std::copy(recent.begin() + 1, recent.end(), recent.begin());
      --recent_count;
    }
    recent[recent_count++] = block;
  }

  // Puts every recently freed block in its pool, merged with its neighbours.
  void return_recent() {
    for (std::size_t i = 0; i < recent_count; ++i) free_block(recent[i]);
    recent_count = 0;
  }

  void absorb_next(Block* block) {
    Block* next = block->next;
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    delete_block(next);
  }

  Block* new_segment(Pool& pool, NativeStream stream, void* ptr, std::size_t bytes) {
    Block* block = new_block();
    block->ptr = ptr;
    block->size = bytes;
    block->stream = stream;
    block->pool = &pool;
    try {
      segments.insert(block);
    } catch (...) {
      delete_block(block);
      throw;
    }
    add(stats.reserved_bytes, as_signed(bytes));
    add(stats.reserved_segments, 1);
    ++stats.backend_allocations;
    if (profiler::detail::on()) {
      profiler::record_allocator_event("segment_alloc", device, as_signed(bytes),
                                       &pool == &small_pool ? "small pool" : "large pool");
    }
    return block;
  }

  // Puts blocks whose other streams have finished with them in their pools; with `wait`, waits for all of them.
  // True when some were put back.
  bool return_pending(bool wait) {
    if (pending == nullptr || pending->empty()) return false;
    const std::vector<void*> done = wait ? pending->wait_all() : pending->take_completed();
    for (void* opaque : done) {
      auto* block = static_cast<Block*>(opaque);
      add(stats.active_bytes, -as_signed(block->size));
      add(stats.active_blocks, -1);
      free_block(block);
    }
    return !done.empty();
  }

  // Returns every cached segment that is wholly free to the backend; the bytes released. `cause` names why, for the
  // profiler's cache_flush event.
  std::size_t release_cached_segments(const char* cause) {
    return_recent();
    return_pending(false);
    std::size_t released = 0;
    for (Pool* pool : {&small_pool, &large_pool}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* block = *it;
        if (block->prev != nullptr || block->next != nullptr) {
          ++it;
          continue;
        }
        resource->free(block->ptr, block->size);  // when this throws, the segment stays cached
        it = pool->erase(it);
        segments.erase(block);
        released += block->size;
        add(stats.reserved_bytes, -as_signed(block->size));
        add(stats.reserved_segments, -1);
        ++stats.backend_frees;
        if (profiler::detail::on()) {
          profiler::record_allocator_event("segment_free", device, as_signed(block->size), cause);
        }
        delete_block(block);
      }
    }
    if (profiler::detail::on()) profiler::record_allocator_event("cache_flush", device, as_signed(released), cause);
    return released;
  }

  bool fits_limit(std::size_t bytes) const {
    return !stats.limit_bytes || as_signed(bytes) <= *stats.limit_bytes - stats.reserved_bytes.current;
  }

  // The segment to ask the backend for: the usual size, or just the request when only that fits the limit.
  std::size_t segment_for(std::size_t size) const {
    const std::size_t usual = segment_size(size);
    return fits_limit(usual) ? usual : size;
  }

  std::size_t largest_free_block() {
    return_recent();
    std::size_t largest = 0;
    for (const Pool* pool : {&small_pool, &large_pool}) {
      for (const Block* block : *pool) largest = std::max(largest, block->size);
    }
    return largest;
  }

  [[noreturn]] void throw_out_of_memory(std::size_t requested, std::size_t size, const char* op, bool by_limit) {
    ++stats.oom_count;
    OutOfMemoryReport report;
    const char* running = op != nullptr ? op : current_op();
    if (profiler::detail::on()) {
      profiler::record_allocator_event("out_of_memory", device, as_signed(requested), running);
    }
    report.op = running != nullptr ? running : "allocation";
    report.device = device;
    report.requested = requested;
    report.rounded = size;
    try {
      report.device_memory = resource->memory_info();
    } catch (const Error&) {
      // The message says the figures are unknown; the out-of-memory error matters more.
    }
    report.allocated = static_cast<std::size_t>(stats.allocated_bytes.current);
    report.reserved = static_cast<std::size_t>(stats.reserved_bytes.current);
    report.largest_free_block = largest_free_block();
    if (stats.limit_bytes) report.limit = static_cast<std::size_t>(*stats.limit_bytes);
    report.stopped_by_limit = by_limit;
    throw OutOfMemoryError(out_of_memory_message(report));
  }

  // A new segment for a block of `size` from the backend, checking the limit first; on failure releases the cache
  // and tries once more. Nullptr when that fails too, with `by_limit` telling whether the limit refused it.
  Block* new_segment_for(Pool& pool, NativeStream stream, std::size_t size, bool& by_limit) {
    by_limit = false;
    std::size_t bytes = segment_for(size);
    if (!fits_limit(bytes)) {
      if (release_cached_segments("over the memory limit") > 0) ++stats.retries;
      bytes = segment_for(size);
      by_limit = !fits_limit(bytes);
      if (by_limit) return nullptr;
    }
    void* ptr = resource->allocate(bytes);
    if (ptr == nullptr && release_cached_segments("device out of memory") > 0) {
      ++stats.retries;
      ptr = resource->allocate(bytes);
    }
    // A device that cannot give the usual segment may still hold the request itself.
    if (ptr == nullptr && bytes > size) {
      bytes = size;
      ptr = resource->allocate(bytes);
    }
    return ptr != nullptr ? new_segment(pool, stream, ptr, bytes) : nullptr;
  }

  // A block for `size` when none is cached: a new segment, or once the blocks that other streams still use have
  // been waited for, one of those or a segment released with them. Throws OutOfMemoryError when none of that works.
  Block* reserve(Pool& pool, NativeStream stream, std::size_t requested, std::size_t size, const char* op) {
    if (size > kMaxRequest) throw_out_of_memory(requested, requested, op, false);
    bool by_limit = false;
    if (Block* block = new_segment_for(pool, stream, size, by_limit)) return block;
    if (return_pending(true)) {
      if (Block* block = take_cached(pool, stream, size)) return block;
      if (Block* block = new_segment_for(pool, stream, size, by_limit)) return block;
    }
    throw_out_of_memory(requested, size, op, by_limit);
  }

  // Records that work on `stream` of `device` uses the allocated `block`; see Note [Memory used on other streams].
  void record_stream(Block* block, Device stream_device, NativeStream stream) {
    if (pending == nullptr || (stream_device == device && stream == block->stream)) return;
    for (const StreamUse& use : block->stream_uses) {
      if (use.device == stream_device && use.stream == stream) return;
    }
    NativeEvent event = pending->take_event(stream_device);
    try {
      block->stream_uses.push_back({stream_device, stream, event});
    } catch (...) {
      pending->destroy_event(stream_device, event);
      throw;
    }
  }
};

namespace {

// Note [Allocators across fork]
// A thread that allocates while another thread forks leaves its allocator's mutex locked in the child for ever, so
// the child's first allocation on that device waited for good (a DataLoader's thread preparing a batch at the fork,
// say). Around fork every allocator's mutex is taken, so that no allocation is half done when the process is
// copied, and released in parent and child alike, as glibc does for malloc's arenas. Allocators register here.
struct LiveAllocators {
  std::mutex mutex;
  std::vector<std::mutex*> mutexes;
};

LiveAllocators& live_allocators() {
  static LiveAllocators* const live = [] {
    auto* created = new LiveAllocators();  // never destroyed: a fork may come while statics are destroyed
    const auto release = [] {
      LiveAllocators& all = live_allocators();
      for (auto it = all.mutexes.rbegin(); it != all.mutexes.rend(); ++it) (*it)->unlock();
      all.mutex.unlock();
    };
    pthread_atfork(
        [] {
          LiveAllocators& all = live_allocators();
          all.mutex.lock();
          for (std::mutex* m : all.mutexes) m->lock();
        },
        release, release);
    return created;
  }();
  return *live;
}

}  // namespace

CachingAllocator::CachingAllocator(std::unique_ptr<MemoryResource> resource) : state_(std::make_unique<State>()) {
  STRATA_CHECK(resource != nullptr, InvalidArgumentError, "CachingAllocator: the memory resource is null");
  state_->device = resource->device();
  if (StreamEvents* events = resource->stream_events()) state_->pending = std::make_unique<PendingFrees>(*events);
  state_->resource = std::move(resource);
  LiveAllocators& live = live_allocators();
  std::lock_guard lock(live.mutex);
  live.mutexes.push_back(&state_->mutex);
}

// Segments still in use when the allocator goes are left to their holders (freeing memory that may still be read
// would be worse than leaking it); only their bookkeeping is dropped.
CachingAllocator::~CachingAllocator() {
  {
    LiveAllocators& live = live_allocators();
    std::lock_guard lock(live.mutex);
    std::erase(live.mutexes, &state_->mutex);
  }
  std::lock_guard lock(state_->mutex);
  try {
    state_->release_cached_segments("allocator destroyed");
  } catch (const Error&) {
    // A backend that fails while shutting down keeps its memory; nothing else can be done in a destructor.
  }
  for (Block* head : state_->segments) {
    for (Block* block = head; block != nullptr;) {
      for (const StreamUse& use : block->stream_uses) state_->pending->destroy_event(use.device, use.event);
      state_->delete_block(std::exchange(block, block->next));
    }
  }
}

Device CachingAllocator::device() const { return state_->device; }

DataPtr CachingAllocator::allocate(std::size_t bytes, NativeStream stream, const char* op) {
  if (bytes == 0) return {};
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.return_pending(false);  // see Note [Memory used on other streams]
  const std::size_t size = bytes > kMaxRequest ? bytes : rounded_size(bytes);
  Pool& pool = size <= kSmallSize ? s.small_pool : s.large_pool;
  Block* block = &pool == &s.small_pool ? s.take_recent(stream, size) : nullptr;
  if (block == nullptr) {
    s.return_recent();  // see Note [Recently freed blocks]
    block = s.take_cached(pool, stream, size);
    if (block == nullptr) block = s.reserve(pool, stream, bytes, size, op);
    s.split(block, size);
  }
  block->requested = bytes;
  add(s.stats.allocated_bytes, as_signed(size));
  add(s.stats.active_bytes, as_signed(block->size));
  add(s.stats.allocated_blocks, 1);
  add(s.stats.active_blocks, 1);
  s.stats.requested_bytes += as_signed(bytes);
  return DataPtr(block->ptr, bytes, s.device, this, block);
}

void CachingAllocator::release(void* opaque) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  auto* block = static_cast<Block*>(opaque);
  add(s.stats.allocated_bytes, -as_signed(rounded_size(block->requested)));
  add(s.stats.allocated_blocks, -1);
  s.stats.requested_bytes -= as_signed(block->requested);
  block->requested = 0;
  if (!block->stream_uses.empty()) {
    // Active until the other streams have finished with it (Note [Memory used on other streams]).
    try {
      s.pending->add(block, std::exchange(block->stream_uses, {}));
    } catch (...) {
      // The block's events could not be recorded, so nothing will tell when those streams are done with it: it is
      // never handed out again, as freeing memory that may still be read would be worse than leaking it.
    }
    return;
  }
  add(s.stats.active_bytes, -as_signed(block->size));
  add(s.stats.active_blocks, -1);
  if (block->pool == &s.small_pool) {
    s.keep_recent(block);
  } else {
    s.free_block(block);
  }
}

void CachingAllocator::record_stream(void* block, Device device, NativeStream stream) {
  STRATA_CHECK(device.is_cpu() || device.has_index(), InvalidArgumentError,
               "record_stream: the stream's device must be concrete, not {} (resolve() names the current one)", device);
  // Host memory may be used by any device's streams (pinned copies); device memory only by its own kind's.
  STRATA_CHECK(state_->device.is_cpu() || device.type() == state_->device.type(), DeviceMismatchError,
               "record_stream: memory on {} cannot be used by a stream of {}", state_->device, device);
  std::lock_guard lock(state_->mutex);
  state_->record_stream(static_cast<Block*>(block), device, stream);
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(state_->mutex);
  state_->release_cached_segments("empty_cache");
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(state_->mutex);
  MemoryStats& s = state_->stats;
  for (Stat* stat : {&s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.allocated_blocks, &s.reserved_segments,
                     &s.active_blocks}) {
    stat->peak = stat->current;
  }
}

void CachingAllocator::set_limit(std::optional<std::size_t> bytes) {
  STRATA_CHECK(!bytes || *bytes <= static_cast<std::size_t>(std::numeric_limits<int64_t>::max()), InvalidArgumentError,
               "set_limit: a limit of {} bytes on {} is too large", bytes.value_or(0), state_->device);
  std::lock_guard lock(state_->mutex);
  state_->stats.limit_bytes = bytes ? std::optional<int64_t>(as_signed(*bytes)) : std::nullopt;
}

std::optional<std::size_t> CachingAllocator::limit() const {
  std::lock_guard lock(state_->mutex);
  const auto& limit = state_->stats.limit_bytes;
  return limit ? std::optional<std::size_t>(static_cast<std::size_t>(*limit)) : std::nullopt;
}

std::size_t CachingAllocator::largest_free_block() const {
  std::lock_guard lock(state_->mutex);
  return state_->largest_free_block();
}

std::string CachingAllocator::summary() const {
  std::lock_guard lock(state_->mutex);
  return format_memory_summary(state_->device, state_->stats, state_->largest_free_block());
}

DataPtr& DataPtr::operator=(DataPtr&& other) noexcept {
  if (this != &other) {
    reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = other.device_;
    owner_ = std::exchange(other.owner_, nullptr);
    block_ = std::exchange(other.block_, nullptr);
  }
  return *this;
}

void DataPtr::record_stream(Device device, NativeStream stream) const {
  if (owner_ != nullptr && block_ != nullptr) owner_->record_stream(block_, device, stream);
}

void DataPtr::reset() {
  if (owner_ != nullptr && block_ != nullptr) owner_->release(block_);
  ptr_ = nullptr;
  size_ = 0;
  owner_ = nullptr;
  block_ = nullptr;
}

}  // namespace strata
