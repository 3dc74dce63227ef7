#include "strata/jit/kernel_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "strata/core/error.h"
#include "strata/jit/jit.h"
#include "strata/runtime/environment.h"

namespace strata::jit {

// Note [The kernel cache]
// A compiled module is a file named by a SHA-256 of everything that decides its bytes: the source, the options,
// the target and architecture, the compiler's identity and version, Strata's kernel ABI version and the text of the
// headers the dialect includes (jit.cpp assembles the key). A new Strata, compiler or header gives new keys, never a
// stale module. Entries are written to a temporary file in the cache folder and renamed into place, so a reader sees
// a whole file or none. Processes that miss the same key at once take an flock on <key>.lock: the first compiles,
// the others wait and then find the entry. flock, not a lock file's existence, is the lock: the kernel releases it
// when a process dies, so a crash never leaves the cache locked. An entry that does not load (truncated, corrupt,
// from an incompatible machine) is removed and compiled again. When the folder cannot be made or written, kernels
// compile into a private temporary folder every time, after one warning.

namespace {

std::atomic<int64_t> g_hits{0}, g_misses{0}, g_discarded{0};

std::filesystem::path home_cache() {
  if (auto xdg = environment_value("XDG_CACHE_HOME")) return std::filesystem::path(*xdg) / "strata" / "kernels";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::filesystem::path(home) / ".cache" / "strata" / "kernels";
  }
  return {};
}

/// The configured folder (may not exist yet), or empty when STRATA_KERNEL_CACHE=off.
std::filesystem::path configured_folder() {
  if (auto value = environment_value("STRATA_KERNEL_CACHE")) {
    if (same_ignoring_case(*value, "off")) return {};
    return std::filesystem::path(*value);
  }
  return home_cache();
}

std::mutex g_warn_mutex;
bool g_warned = false;

void warn_once(const std::string& why) {
  std::lock_guard lock(g_warn_mutex);
  if (g_warned) return;
  g_warned = true;
  std::fprintf(stderr, "strata: warning: the kernel cache is not used (%s); kernels compile at every first launch\n",
               why.c_str());
}

/// A private folder for entries built without the cache, made once per process.
std::filesystem::path private_folder() {
  static std::mutex mutex;
  static std::filesystem::path folder;
  std::lock_guard lock(mutex);
  if (folder.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "strata-kernels-XXXXXX").string();
    STRATA_CHECK(mkdtemp(pattern.data()) != nullptr, IOError, "jit: cannot make a temporary folder {}: {}", pattern,
                 std::strerror(errno));
    folder = pattern;
  }
  return folder;
}

std::filesystem::path unique_name(const std::filesystem::path& folder, const std::string& key,
                                  const std::string& suffix) {
  static std::atomic<uint64_t> counter{0};
  return folder / fmt::format(".tmp-{}-{}-{}{}", key.substr(0, 16), getpid(), counter++, suffix);
}

/// An flock held on <folder>/<key>.lock while this object lives; `ok` false when the lock file cannot be opened.
class EntryLock {
 public:
  EntryLock(const std::filesystem::path& folder, const std::string& key) {
    fd_ = ::open((folder / (key + ".lock")).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    while (flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        ::close(fd_);
        fd_ = -1;
        return;
      }
    }
  }
  ~EntryLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the flock
  }
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace

namespace detail {

std::filesystem::path cached_path(const std::string& key, const std::string& suffix,
                                  const std::function<void(const std::filesystem::path&)>& build,
                                  const std::function<bool(const std::filesystem::path&)>& valid, bool& temporary,
                                  bool use_disk, bool* hit) {
  const auto uncached = [&] {
    const std::filesystem::path path = unique_name(private_folder(), key, suffix);
    g_misses.fetch_add(1, std::memory_order_relaxed);
    build(path);
    temporary = true;
    return path;
  };
  temporary = false;
  if (hit != nullptr) *hit = false;
  const std::filesystem::path folder = use_disk ? configured_folder() : std::filesystem::path();
  if (folder.empty()) return uncached();
  const std::filesystem::path entry = folder / (key + suffix);
  const auto usable = [&] {
    std::error_code ec;
    if (!std::filesystem::exists(entry, ec)) return false;
    if (valid(entry)) return true;
    std::filesystem::remove(entry, ec);
    g_discarded.fetch_add(1, std::memory_order_relaxed);
    return false;
  };
  if (usable()) {
    g_hits.fetch_add(1, std::memory_order_relaxed);
    if (hit != nullptr) *hit = true;
    return entry;
  }
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    warn_once(fmt::format("cannot make {}: {}", folder.string(), ec.message()));
    return uncached();
  }
  const EntryLock lock(folder, key);
  if (!lock.ok()) {
    warn_once(fmt::format("cannot write in {}: {}", folder.string(), std::strerror(errno)));
    return uncached();
  }
  if (usable()) {  // another process built it while we waited for the lock
    g_hits.fetch_add(1, std::memory_order_relaxed);
    if (hit != nullptr) *hit = true;
    return entry;
  }
  const std::filesystem::path partial = unique_name(folder, key, suffix);
  g_misses.fetch_add(1, std::memory_order_relaxed);
  try {
    build(partial);
  } catch (...) {
    std::filesystem::remove(partial, ec);
    throw;
  }
  std::filesystem::rename(partial, entry, ec);
  if (ec) {
    std::filesystem::remove(partial, ec);
    warn_once(fmt::format("cannot write in {}: {}", folder.string(), ec.message()));
    return uncached();
  }
  return entry;
}

void discard(const std::string& key, const std::string& suffix) {
  const std::filesystem::path folder = configured_folder();
  if (folder.empty()) return;
  std::error_code ec;
  if (std::filesystem::remove(folder / (key + suffix), ec)) g_discarded.fetch_add(1, std::memory_order_relaxed);
}

void throw_unopenable(const std::filesystem::path& path) {
  STRATA_THROW(CompileError, "jit: the module just compiled ({}) could not be loaded", path.string());
}

}  // namespace detail

CacheStats cache_stats() {
  return {g_hits.load(std::memory_order_relaxed), g_misses.load(std::memory_order_relaxed),
          g_discarded.load(std::memory_order_relaxed)};
}

std::string cache_folder() {
  const std::filesystem::path folder = configured_folder();
  if (folder.empty()) return {};
  std::lock_guard lock(g_warn_mutex);
  return g_warned ? std::string() : folder.string();
}

}  // namespace strata::jit
