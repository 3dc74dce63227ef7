#include "strata/io/file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>

#include "strata/core/error.h"

namespace strata::io {

namespace {

std::string error_text() { return std::strerror(errno); }

std::function<void(detail::SavePoint)>& save_point_hook() {
  static std::function<void(detail::SavePoint)> hook;
  return hook;
}

std::atomic<bool>& unnamed_allowed() {
  static std::atomic<bool> allowed{true};
  return allowed;
}

void reached(detail::SavePoint point) {
  if (save_point_hook()) save_point_hook()(point);
}

std::filesystem::path directory_of(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
}

// The pid in a name `<prefix><pid>-<n>` or `<prefix><pid>-u<n>` (a linked unnamed file), or -1 when the name is not
// such a temporary file.
pid_t temporary_pid(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return -1;
  name.remove_prefix(prefix.size());
  const auto dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0) return -1;
  pid_t pid = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + dash, pid);
  if (ec != std::errc() || end != name.data() + dash || pid <= 0) return -1;
  std::string_view serial = name.substr(dash + 1);
  if (serial.starts_with('u')) serial.remove_prefix(1);
  if (serial.empty() || serial.find_first_not_of("0123456789") != std::string_view::npos) return -1;
  return pid;
}

// A path for messages: a NUL byte would end the C string that carries the message.
std::string shown(const std::filesystem::path& path) {
  std::string text = path.string();
  for (auto at = text.find('\0'); at != std::string::npos; at = text.find('\0', at)) text.replace(at, 1, "\\0");
  return text;
}

// The system calls take C strings, which a NUL byte would cut short: 'a\0b' would name 'a'. Python's open raises
// ValueError for it too.
void check_no_nul(const std::filesystem::path& path, std::string_view op) {
  STRATA_CHECK(path.native().find('\0') == std::string::npos, InvalidArgumentError,
               "{}: the path '{}' holds a NUL byte, which no file name can", op, shown(path));
}

// What a file of mode `mode` is, when a save must not replace it; nullptr for a regular file.
const char* special_kind(mode_t mode) {
  if (S_ISREG(mode)) return nullptr;
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

[[noreturn]] void refuse_special(const std::filesystem::path& path, std::string_view op, const char* kind) {
  STRATA_THROW(IOError,
               "{}: '{}' is {}; a save replaces only a regular file (or creates a new one), never a device, FIFO, "
               "socket or directory",
               op, path.string(), kind);
}

// The path a save renames its new file over: `path` when it is missing or a regular file, the target of a symbolic
// link to a regular file (the link stays, as when open() writes through it). Anything else is refused, before any
// byte is written: renaming over /dev/null, as root, would replace the device with a file.
std::filesystem::path replaceable_path(const std::filesystem::path& path, std::string_view op) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    STRATA_CHECK(errno == ENOENT, IOError, "{}: cannot examine '{}': {}", op, path.string(), error_text());
    return path;
  }
  if (!S_ISLNK(st.st_mode)) {
    if (const char* kind = special_kind(st.st_mode)) refuse_special(path, op, kind);
    return path;
  }
  STRATA_CHECK(::stat(path.c_str(), &st) == 0, IOError, "{}: '{}' is a symbolic link whose target cannot be used: {}",
               op, path.string(), error_text());
  if (const char* kind = special_kind(st.st_mode)) {
    STRATA_THROW(IOError,
                 "{}: '{}' is a symbolic link to {}; a save replaces only a regular file (or creates a new one), never "
                 "a device, FIFO, socket or directory",
                 op, path.string(), kind);
  }
  char* real = ::realpath(path.c_str(), nullptr);
  STRATA_CHECK(real != nullptr, IOError, "{}: cannot resolve the symbolic link '{}': {}", op, path.string(),
               error_text());
  std::filesystem::path target(real);
  ::free(real);  // NOLINT: realpath's buffer comes from malloc
  return target;
}

bool process_is_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

std::string temporary_prefix(const std::filesystem::path& path) { return path.filename().string() + ".tmp-"; }

// `<path>.tmp-<pid>-<tag><n>`, the one form temporary_pid reads back; the serial makes each call's name new in this
// process.
std::filesystem::path temporary_name(const std::filesystem::path& path, const char* tag) {
  static std::atomic<uint64_t> serial{0};
  return path.parent_path() /
         (temporary_prefix(path) + std::to_string(::getpid()) + "-" + tag + std::to_string(serial.fetch_add(1)));
}

}  // namespace

void detail::set_save_point_hook(std::function<void(SavePoint)> hook) { save_point_hook() = std::move(hook); }

void detail::set_unnamed_temporaries(bool allowed) { unnamed_allowed() = allowed; }

int remove_stale_temporaries(const std::filesystem::path& path) {
  const std::string prefix = temporary_prefix(path);
  std::error_code ec;
  std::filesystem::directory_iterator it(directory_of(path), ec);
  int removed = 0;
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const pid_t pid = temporary_pid(it->path().filename().string(), prefix);
    if (pid > 0 && process_is_gone(pid) && ::unlink(it->path().c_str()) == 0) ++removed;
  }
  return removed;
}

AtomicFile::AtomicFile(std::filesystem::path path, std::string op) : path_(std::move(path)), op_(std::move(op)) {
  check_no_nul(path_, op_);
  STRATA_CHECK(path_.has_filename(), IOError, "{}: '{}' names no file to write", op_, path_.string());
  path_ = replaceable_path(path_, op_);
  remove_stale_temporaries(path_);
  // linkat names an unnamed file through /proc/self/fd (AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH).
  if (unnamed_allowed() && ::access("/proc/self/fd", X_OK) == 0) {
    fd_ = ::open(directory_of(path_).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    // EOPNOTSUPP: the filesystem has no unnamed files; EISDIR or EINVAL: the kernel predates them.
    if (fd_ < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
      STRATA_THROW(IOError, "{}: cannot create a file in '{}' to write '{}': {}", op_, directory_of(path_).string(),
                   path_.string(), error_text());
    }
    unnamed_ = fd_ >= 0;
  }
  if (!unnamed_) {
    // A name no other writer uses, in this process or another: two saves of one path at once must not write into
    // each other's temporary file. The last rename wins, and each file renamed is whole.
    do {
      temp_ = temporary_name(path_, "");
      fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    } while (fd_ < 0 && errno == EEXIST);
    STRATA_CHECK(fd_ >= 0, IOError, "{}: cannot create '{}' to write '{}': {}", op_, temp_.string(), path_.string(),
                 error_text());
  }
  reached(detail::SavePoint::Created);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    if (!temp_.empty()) ::unlink(temp_.c_str());
  }
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    STRATA_CHECK(n > 0, IOError, "{}: writing the new '{}' failed: {}", op_, path_.string(),
                 n < 0 ? error_text() : "no progress");
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

// Gives the unnamed file its temporary name, for the rename. The name lives only until the rename.
void AtomicFile::link_temporary() {
  const std::string fd_path = "/proc/self/fd/" + std::to_string(fd_);
  int linked = -1;
  do {
    temp_ = temporary_name(path_, "u");
    linked = ::linkat(AT_FDCWD, fd_path.c_str(), AT_FDCWD, temp_.c_str(), AT_SYMLINK_FOLLOW);
  } while (linked != 0 && errno == EEXIST);
  if (linked != 0) {
    const std::string why = error_text();
    temp_.clear();
    STRATA_THROW(IOError, "{}: cannot give the new '{}' a name in its directory: {}", op_, path_.string(), why);
  }
  reached(detail::SavePoint::Linked);
}

void AtomicFile::commit() {
  STRATA_CHECK(::fsync(fd_) == 0, IOError, "{}: flushing the new '{}' to disk failed: {}", op_, path_.string(),
               error_text());
  reached(detail::SavePoint::Flushed);
  if (unnamed_) link_temporary();
  const int closed = ::close(fd_);
  const int close_errno = errno;
  fd_ = -1;
  if (closed != 0) {
    ::unlink(temp_.c_str());
    STRATA_THROW(IOError, "{}: closing '{}' failed: {}", op_, temp_.string(), std::strerror(close_errno));
  }
  // Checked again at the last moment: the path may have become something else while the file was written.
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && !S_ISLNK(st.st_mode)) {
    if (const char* kind = special_kind(st.st_mode)) {
      ::unlink(temp_.c_str());
      refuse_special(path_, op_, kind);
    }
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const std::string why = error_text();
    ::unlink(temp_.c_str());
    STRATA_THROW(IOError, "{}: renaming '{}' to '{}' failed: {}", op_, temp_.string(), path_.string(), why);
  }
  reached(detail::SavePoint::Renamed);
  // The rename is durable only once the directory entry is on disk too.
  const std::filesystem::path dir = directory_of(path_);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  STRATA_CHECK(dir_fd >= 0, IOError, "{}: wrote '{}' but cannot open its directory to flush it: {}", op_,
               path_.string(), error_text());
  const int synced = ::fsync(dir_fd);
  const int sync_errno = errno;
  ::close(dir_fd);
  STRATA_CHECK(synced == 0, IOError, "{}: wrote '{}' but flushing its directory failed: {}", op_, path_.string(),
               std::strerror(sync_errno));
}

// The lock is flock()'s: it belongs to the open file description, so it dies with the process and also excludes a
// second taker within one process (fcntl's record locks would do neither). The holder removes the file while still
// holding the lock; a taker that locked a file since removed (its inode is no longer the path's) tries again.
FileLock::FileLock(std::filesystem::path path, std::string op) : path_(std::move(path)) {
  for (;;) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    STRATA_CHECK(fd_ >= 0, IOError, "{}: cannot open the lock file '{}': {}", op, path_.string(), error_text());
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const std::string why = errno == EWOULDBLOCK ? "" : error_text();
      char text[32] = {};
      const ssize_t n = ::pread(fd_, text, sizeof(text) - 1, 0);
      ::close(fd_);
      fd_ = -1;
      STRATA_CHECK(why.empty(), IOError, "{}: cannot lock '{}': {}", op, path_.string(), why);
      pid_t holder = 0;
      const bool named = n > 0 && std::from_chars(text, text + n, holder).ec == std::errc() && holder > 0;
      STRATA_THROW(IOError,
                   "{}: '{}' is held by {}: another run is using the file it guards; wait for that run to end, or "
                   "choose another file",
                   op, path_.string(), named ? fmt::format("process {}", holder) : std::string("another process"));
    }
    struct stat held {}, named {};
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      break;
    }
    ::close(fd_);  // removed by its last holder after we opened it
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const std::string why = error_text();
    ::unlink(path_.c_str());
    ::close(fd_);
    STRATA_THROW(IOError, "{}: cannot write this process's pid into the lock file '{}': {}", op, path_.string(), why);
  }
}

FileLock::~FileLock() {
  ::unlink(path_.c_str());
  ::close(fd_);
}

OpenedFile open_regular_file(const std::filesystem::path& path, std::string_view op) {
  check_no_nul(path, op);
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; the check below refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  STRATA_CHECK(fd >= 0, IOError, "{}: cannot open '{}': {}", op, path.string(), error_text());
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    const std::string why = !stat_ok ? error_text() : S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file";
    ::close(fd);
    STRATA_THROW(IOError, "{}: cannot read '{}': {}", op, path.string(), why);
  }
  return {fd, static_cast<uint64_t>(st.st_size)};
}

ReadOnlyFile::ReadOnlyFile(std::filesystem::path path, std::string op) : path_(std::move(path)), op_(std::move(op)) {
  const OpenedFile file = open_regular_file(path_, op_);
  fd_ = file.fd;
  size_ = file.size;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReadOnlyFile::read_at(uint64_t offset, void* out, std::size_t bytes) const {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    STRATA_CHECK(n >= 0, IOError, "{}: reading '{}' failed: {}", op_, path_.string(), error_text());
    STRATA_CHECK(n > 0, IOError, "{}: '{}' ended early at byte {} (was it changed while being read?)", op_,
                 path_.string(), offset);
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
}

}  // namespace strata::io
