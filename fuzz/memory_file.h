#pragma once

// The fuzzer's bytes as a file, for readers that take a path: an anonymous file in memory (memfd_create), named
// through /proc/self/fd, so that no input touches the disk and one file serves every run of the process.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace strata::fuzz {

class MemoryFile {
 public:
  MemoryFile() : fd_(::memfd_create("strata-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  /// Replaces the file's contents with `size` bytes at `data`.
  void set(const void* data, std::size_t size) {
    if (::ftruncate(fd_, 0) != 0) fail("ftruncate");
    const auto* p = static_cast<const char*>(data);
    for (std::size_t done = 0; done < size;) {
      const ssize_t n = ::pwrite(fd_, p + done, size - done, static_cast<off_t>(done));
      if (n <= 0) fail("pwrite");
      done += static_cast<std::size_t>(n);
    }
  }

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] static void fail(const char* what) {
    std::perror(what);
    std::abort();
  }

  int fd_;
  std::string path_;
};

}  // namespace strata::fuzz
