#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace strata::io {

// Note [Saves leave nothing behind]
// A save writes a new file and renames it over the old one, so a reader sees the old file or the new one, whole.
// The new file must not outlive a process killed midway. Where the filesystem allows it (Linux's O_TMPFILE, on
// ext4, xfs, btrfs, tmpfs...), it is written without a name, so a kill before commit() leaves nothing; commit()
// gives it the name `<path>.tmp-<pid>-<n>` (linkat) only to rename it over `path` at once. Elsewhere the file is
// written under that name from the start. Either way a kill can leave such a name behind (for an instant or for the
// whole write), so every AtomicFile first removes the `<path>.tmp-<pid>-<n>` files whose process is gone (kill(pid,
// 0) says ESRCH): a file of a live process, this one included, is another save in progress. A pid reused by an
// unrelated process keeps its stale file until that process ends; so do files of processes in another pid
// namespace that shares the directory, since their pids mean nothing here.

/// A file being replaced atomically (see Note [Saves leave nothing behind]): writes go to a new file, unnamed where
/// the filesystem allows it, else `<path>.tmp-<pid>-<n>`; commit() flushes it to disk, renames it over `path` and
/// flushes the directory. Destroyed without commit() (an exception midway), it removes the temporary file and leaves
/// `path` untouched. `path` must be new or a regular file (through a symbolic link, its target is replaced): a
/// device, FIFO, socket or directory is refused, when the file is created and again before the rename. Errors throw
/// IOError naming `op` and the file; a NUL byte in the path is an InvalidArgumentError.
class AtomicFile {
 public:
  AtomicFile(std::filesystem::path path, std::string op);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t bytes);
  void commit();
  /// Whether the file being written has no name yet (O_TMPFILE).
  bool unnamed() const { return unnamed_; }

 private:
  void link_temporary();

  std::filesystem::path path_;
  std::filesystem::path temp_;  // empty while the file has no name
  std::string op_;
  int fd_ = -1;
  bool unnamed_ = false;
};

/// Removes the temporary files `<path>.tmp-<pid>-<n>` beside `path` whose process no longer runs, and returns how
/// many it removed (see Note [Saves leave nothing behind]). Files it cannot remove are left alone.
int remove_stale_temporaries(const std::filesystem::path& path);

/// An advisory lock on `path` (a lock file, created if missing), held until destruction, when the file is removed.
/// It dies with its process, kill -9 included. Also excludes a second lock within one process. The holder writes
/// its pid into the file, so a refused taker can name it.
class FileLock {
 public:
  /// Takes the lock, or throws IOError naming `op`, the file and the pid of the process holding it.
  FileLock(std::filesystem::path path, std::string op);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

/// A descriptor open for reading (the caller closes it) and the file's size.
struct OpenedFile {
  int fd;
  uint64_t size;
};

/// Opens `path` for reading if it is a regular file. Neither a FIFO without a writer nor a device blocks the call;
/// they, directories and missing files throw IOError naming `op` and the file; a NUL byte in the path is an
/// InvalidArgumentError.
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

namespace detail {
/// The points of an AtomicFile's life where a test may kill the process or fail the save.
enum class SavePoint { Created, Flushed, Linked, Renamed };
/// Test hook: called at each SavePoint (nullptr: none). Not thread-safe; tests only.
void set_save_point_hook(std::function<void(SavePoint)> hook);
/// Test switch: false makes AtomicFile write named temporary files even where unnamed ones are possible.
void set_unnamed_temporaries(bool allowed);
}  // namespace detail

}  // namespace strata::io
