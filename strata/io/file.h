#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace strata::io {

/// A file being replaced atomically: writes go to a new `<path>.tmp-<pid>-<n>`; commit() flushes it to disk, renames
/// it over `path` and flushes the directory. Destroyed without commit() (an exception midway), it removes the
/// temporary file and leaves `path` untouched. Errors throw IOError naming `op` and the file.
class AtomicFile {
 public:
  AtomicFile(std::filesystem::path path, std::string op);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t bytes);
  void commit();
  const std::filesystem::path& temp_path() const { return temp_; }

 private:
  std::filesystem::path path_;
  std::filesystem::path temp_;
  std::string op_;
  int fd_ = -1;
};

/// A descriptor open for reading (the caller closes it) and the file's size.
struct OpenedFile {
  int fd;
  uint64_t size;
};

/// Opens `path` for reading if it is a regular file. Neither a FIFO without a writer nor a device blocks the call;
/// they, directories and missing files throw IOError naming `op` and the file.
OpenedFile open_regular_file(const std::filesystem::path& path, std::string_view op);

/// A file opened for reading at given offsets. Errors throw IOError naming `op` and the file.
class ReadOnlyFile {
 public:
  ReadOnlyFile(std::filesystem::path path, std::string op);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  uint64_t size() const { return size_; }
  /// Reads exactly `bytes` at `offset`; throws IOError if the file ends first.
  void read_at(uint64_t offset, void* out, std::size_t bytes) const;

 private:
  std::filesystem::path path_;
  std::string op_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace strata::io
