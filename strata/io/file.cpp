#include "strata/io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "strata/core/error.h"

namespace strata::io {

namespace {

std::string error_text() { return std::strerror(errno); }

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path, std::string op) : path_(std::move(path)), op_(std::move(op)) {
  STRATA_CHECK(path_.has_filename(), IOError, "{}: '{}' names no file to write", op_, path_.string());
  // A name no other writer uses, in this process or another: two saves of one path at once must not write into
  // each other's temporary file. The last rename wins, and each file renamed is whole.
  static std::atomic<uint64_t> serial{0};
  do {
    temp_ = path_;
    temp_ += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(serial.fetch_add(1));
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  } while (fd_ < 0 && errno == EEXIST);
  STRATA_CHECK(fd_ >= 0, IOError, "{}: cannot create '{}' to write '{}': {}", op_, temp_.string(), path_.string(),
               error_text());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    STRATA_CHECK(n > 0, IOError, "{}: writing '{}' failed: {}", op_, temp_.string(),
                 n < 0 ? error_text() : "no progress");
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  STRATA_CHECK(::fsync(fd_) == 0, IOError, "{}: flushing '{}' to disk failed: {}", op_, temp_.string(), error_text());
  const int closed = ::close(fd_);
  const int close_errno = errno;
  if (closed != 0) {
    fd_ = -1;
    ::unlink(temp_.c_str());
    STRATA_THROW(IOError, "{}: closing '{}' failed: {}", op_, temp_.string(), std::strerror(close_errno));
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const std::string why = error_text();
    fd_ = -1;
    ::unlink(temp_.c_str());
    STRATA_THROW(IOError, "{}: renaming '{}' to '{}' failed: {}", op_, temp_.string(), path_.string(), why);
  }
  fd_ = -1;
  // The rename is durable only once the directory entry is on disk too.
  const std::filesystem::path dir = path_.has_parent_path() ? path_.parent_path() : std::filesystem::path(".");
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  STRATA_CHECK(dir_fd >= 0, IOError, "{}: wrote '{}' but cannot open its directory to flush it: {}", op_,
               path_.string(), error_text());
  const int synced = ::fsync(dir_fd);
  const int sync_errno = errno;
  ::close(dir_fd);
  STRATA_CHECK(synced == 0, IOError, "{}: wrote '{}' but flushing its directory failed: {}", op_, path_.string(),
               std::strerror(sync_errno));
}

OpenedFile open_regular_file(const std::filesystem::path& path, std::string_view op) {
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
