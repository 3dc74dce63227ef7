#include "strata/runtime/transfer.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "strata/core/error.h"
#include "strata/runtime/kernel_assert.h"
#include "strata/runtime/plugin.h"
#include "strata/runtime/profiler.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/sync_debug.h"

namespace strata {

namespace {

struct AtomicCounters {
  std::atomic<int64_t> h2d_copies{0}, h2d_bytes{0}, d2h_copies{0}, d2h_bytes{0}, d2d_copies{0}, d2d_bytes{0},
      syncs{0};
};

AtomicCounters& counters() {
  static AtomicCounters c;
  return c;
}

}  // namespace

TransferCounters transfer_counters() {
  auto& c = counters();
  return {c.h2d_copies.load(), c.h2d_bytes.load(), c.d2h_copies.load(), c.d2h_bytes.load(),
          c.d2d_copies.load(), c.d2d_bytes.load(), c.syncs.load()};
}

void reset_transfer_counters() {
  auto& c = counters();
  for (auto* a : {&c.h2d_copies, &c.h2d_bytes, &c.d2h_copies, &c.d2h_bytes, &c.d2d_copies, &c.d2d_bytes, &c.syncs}) {
    a->store(0);
  }
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes,
                NativeStream stream, bool blocking) {
  dst_device = resolve(dst_device);
  src_device = resolve(src_device);
  if (bytes == 0) return;
  auto& c = counters();
  const auto n = static_cast<int64_t>(bytes);
  const int64_t started = profiler::detail::on() ? profiler::detail::now_ns() : -1;  // Note [The profiler]
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    // Between two virtual CPU devices it is a device-to-device copy like any other (Note [Virtual CPU devices]).
    std::memcpy(dst, src, bytes);
    if (dst_device != src_device) {
      c.d2d_copies.fetch_add(1, std::memory_order_relaxed);
      c.d2d_bytes.fetch_add(n, std::memory_order_relaxed);
      if (started >= 0) profiler::record_copy(dst_device, src_device, n, started);
    }
    return;
  }
  if (src_device.is_cpu()) {
    c.h2d_copies.fetch_add(1, std::memory_order_relaxed);
    c.h2d_bytes.fetch_add(n, std::memory_order_relaxed);
  } else if (dst_device.is_cpu()) {
    c.d2h_copies.fetch_add(1, std::memory_order_relaxed);
    c.d2h_bytes.fetch_add(n, std::memory_order_relaxed);
  } else {
    c.d2d_copies.fetch_add(1, std::memory_order_relaxed);
    c.d2d_bytes.fetch_add(n, std::memory_order_relaxed);
  }
  const Device gpu_side = src_device.is_cpu() ? dst_device : src_device;
  if (blocking) note_synchronization(gpu_side, "copy");
  backend(gpu_side).copy(dst, dst_device, src, src_device, bytes, stream, blocking);
  if (blocking) check_stream_asserts(gpu_side, stream);  // only this stream is known to be done
  if (started >= 0) profiler::record_copy(dst_device, src_device, n, started);
}

void note_synchronization(Device device, const char* what) {
  if (device.is_cpu()) return;
  counters().syncs.fetch_add(1, std::memory_order_relaxed);
  if (profiler::detail::on()) profiler::record_synchronization(device, what);
  switch (sync_debug_mode()) {
    case SyncDebugMode::Off: return;
    case SyncDebugMode::Warn:
      std::fprintf(stderr, "strata: warning: %s synchronises with %s (STRATA_SYNC_DEBUG=warn)\n", what,
                   device.str().c_str());
      return;
    case SyncDebugMode::Error:
      STRATA_THROW(SyncDebugError, "{} would synchronise with {}, which STRATA_SYNC_DEBUG=error forbids", what, device);
  }
}

}  // namespace strata
