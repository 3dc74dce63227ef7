#include "strata/runtime/memory_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "strata/runtime/memory_limit.h"

namespace strata {

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

// A round figure for the STRATA_MEMORY_LIMIT example: `bytes` rounded up to whole GiB (or MiB when small).
std::string limit_suggestion(std::size_t bytes) {
  if (bytes > kGiB) return fmt::format("{}GiB", (bytes + kGiB - 1) / kGiB);
  return fmt::format("{}MiB", std::max<std::size_t>(1, (bytes + kMiB - 1) / kMiB));
}

// Note [Out-of-memory hints]
// The hint names the cause we can see, because the cures differ. (1) The limit refused a new segment: the device
// may well have room, so say how to raise or clear the limit. (2) Fragmentation: the memory reserved but not
// allocated would hold the request, yet no free block is big enough (free pieces are scattered across segments
// that are partly in use); returning cached segments or making requests smaller helps. (3) Otherwise the process
// really holds too much: free tensors or shrink the batch. The allocator has already released its cache and
// retried before it reports, so the figures are the ones that remain.
std::string hint(const OutOfMemoryReport& r) {
  if (r.stopped_by_limit) {
    return fmt::format(
        "The memory limit of {} refused it: a new segment would take reserved memory from {} past the limit of {}. "
        "Raise the limit with set_memory_limit() or set_memory_fraction(), or through {} ({}={}={} is what this "
        "request needs on top of what is reserved now; a run that keeps allocating, such as training, will need "
        "more), or remove it with clear_memory_limit().",
        r.device, format_bytes(r.reserved), format_bytes(r.limit.value_or(0)), kMemoryLimitVariable,
        kMemoryLimitVariable, r.device, limit_suggestion(r.reserved + r.rounded));
  }
  const std::size_t unallocated = r.reserved > r.allocated ? r.reserved - r.allocated : 0;
  if (unallocated >= r.rounded && r.largest_free_block < r.rounded) {
    return fmt::format(
        "{} is reserved but unallocated, yet no free cached block holds {} (the largest is {}): the cache is "
        "fragmented. Call empty_cache() to return unused segments to the device, or use smaller batches so that "
        "requests fit the free blocks.",
        format_bytes(unallocated), format_bytes(r.requested), format_bytes(r.largest_free_block));
  }
  if (r.device_memory && r.rounded > r.device_memory->total) {
    return fmt::format(
        "The request alone is larger than all of {}'s memory: check the shape of the tensor, or reduce the batch "
        "size.",
        r.device);
  }
  return "The device is short of memory: free the tensors you no longer need (drop every reference to them) or "
         "reduce the batch size.";
}

}  // namespace

std::string out_of_memory_message(const OutOfMemoryReport& r) {
  std::string device_part = r.device_memory
                                ? fmt::format("The device has {} in total, of which {} is free",
                                              format_bytes(r.device_memory->total), format_bytes(r.device_memory->free))
                                : std::string("The device's total and free memory could not be read");
  std::string limit_part =
      r.limit ? fmt::format("; the memory limit of {} is {}", r.device, format_bytes(*r.limit)) : std::string();
  return fmt::format(
      "{}: could not allocate {} on {}. {}; this process has {} allocated and {} reserved by Strata's caching "
      "allocator, and the largest free cached block is {}{}. {}",
      r.op, format_bytes(r.requested), r.device, device_part, format_bytes(r.allocated), format_bytes(r.reserved),
      format_bytes(r.largest_free_block), limit_part, hint(r));
}

std::string format_memory_summary(Device device, const MemoryStats& s, std::size_t largest_free_block) {
  constexpr int kNameWidth = 26;
  constexpr int kColumnWidth = 12;
  const auto bytes = [](int64_t v) { return format_bytes(static_cast<std::size_t>(std::max<int64_t>(v, 0))); };
  const auto count = [](int64_t v) { return fmt::format("{}", v); };
  const auto row = [&](std::string_view name, const std::string& a, const std::string& b, const std::string& c,
                       const std::string& d) {
    return fmt::format("| {:<{}} | {:>{}} | {:>{}} | {:>{}} | {:>{}} |\n", name, kNameWidth, a, kColumnWidth, b,
                       kColumnWidth, c, kColumnWidth, d, kColumnWidth);
  };
  const auto stat_row = [&](std::string_view name, const Stat& stat, auto format) {
    return row(name, format(stat.current), format(stat.peak), format(stat.total), format(stat.total - stat.current));
  };
  const std::string header = row("Metric", "Cur usage", "Peak usage", "Tot alloc", "Tot freed");
  const std::size_t width = header.size() - 1;  // without the newline
  const std::string rule = fmt::format("|{:-<{}}|\n", "", width - 2);
  const std::string thick = fmt::format("|{:=<{}}|\n", "", width - 2);
  const auto line = [&](const std::string& text) { return fmt::format("| {:<{}} |\n", text, width - 4); };

  std::string out = thick;
  out += line(fmt::format("Strata memory summary, device: {}", device));
  out += rule + header + rule;
  out += stat_row("Allocated memory", s.allocated_bytes, bytes);
  out += stat_row("Active memory", s.active_bytes, bytes);
  out += stat_row("Reserved memory", s.reserved_bytes, bytes);
  out += row("Requested memory", bytes(s.requested_bytes), "-", "-", "-");
  out += rule;
  out += stat_row("Allocations", s.allocated_blocks, count);
  out += stat_row("Active allocations", s.active_blocks, count);
  out += stat_row("Reserved segments", s.reserved_segments, count);
  out += rule;
  out += line(fmt::format("Backend allocations: {}   Backend frees: {}   OOMs: {}   Retries: {}", s.backend_allocations,
                          s.backend_frees, s.oom_count, s.retries));
  out += line(fmt::format("Largest free cached block: {}   Memory limit: {}", format_bytes(largest_free_block),
                          s.limit_bytes ? bytes(*s.limit_bytes) : std::string("none")));
  out += thick;
  return out;
}

}  // namespace strata
