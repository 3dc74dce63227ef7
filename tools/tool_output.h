// What every tool's main does last: make sure its output reached stdout.
#pragma once

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace strata::tools {

/// Whether everything printed to stdout got there. Output to a full disk, /dev/full or a closed descriptor fails
/// only when flushed, and a tool that ignores that exits 0 having lost its output; this says so on stderr, naming
/// `tool`, and the tool exits 1.
inline bool stdout_written(const char* tool) {
  errno = 0;
  std::cout.flush();
  const bool written = std::fflush(stdout) == 0 && std::ferror(stdout) == 0 && std::cout.good();
  if (!written) {
    fmt::print(stderr, "{}: error: writing to standard output failed{}{}\n", tool, errno != 0 ? ": " : "",
               errno != 0 ? std::strerror(errno) : "");
  }
  return written;
}

}  // namespace strata::tools
