#include "job_checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "strata/core/error.h"

namespace strata::train {

// Note [The checkpoint path is checked before training]
// A checkpoint is written after each epoch (or evaluation); a path that cannot be written would otherwise be found
// out only then, with the work lost. So the path is tried at start-up: a temporary file is created beside it and
// removed again, as each save does (which also removes what killed saves left, Note [Saves leave nothing behind]).
// And an existing file is replaced only when the run resumes from it: one that is not a checkpoint of this run (any
// other file, or another run's checkpoint) is refused rather than overwritten.
//
// Note [One run per checkpoint]
// Two runs on one checkpoint would overwrite each other's saves, the last writer winning. So a run holds the lock
// `<checkpoint>.lock` (io::FileLock) from before it looks at the checkpoint until it ends: a second run is refused,
// naming the pid of the first. The lock is on a file beside the checkpoint, not on the checkpoint itself, because
// every save replaces the checkpoint's inode. It is flock()'s, so it dies with its process, kill -9 included.
std::unique_ptr<io::FileLock> claim_checkpoint(const std::filesystem::path& path, bool resume) {
  STRATA_CHECK(!path.empty(), InvalidArgumentError, "strata-train: --checkpoint needs a file name");
  std::error_code ec;
  const bool is_dir = std::filesystem::is_directory(path, ec);
  STRATA_CHECK(!is_dir, IOError, "strata-train: --checkpoint '{}' is a directory; name a file", path.string());
  std::filesystem::path lock_path = path;
  lock_path += ".lock";
  auto lock = std::make_unique<io::FileLock>(lock_path, fmt::format("strata-train: --checkpoint '{}'", path.string()));
  STRATA_CHECK(resume || !checkpoint_exists(path), IOError,
               "strata-train: --checkpoint '{}' exists; pass --resume to continue from it, or remove it or name "
               "another file to start afresh",
               path.string());
  (void)io::AtomicFile(path, "strata-train --checkpoint");
  return lock;
}

bool checkpoint_exists(const std::filesystem::path& path) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  STRATA_CHECK(!ec, IOError, "strata-train: cannot look up --checkpoint '{}': {}", path.string(), ec.message());
  return exists;
}

std::string metadata_value(const std::filesystem::path& path, const io::Metadata& metadata, const char* key) {
  const auto it = metadata.find(key);
  STRATA_CHECK(it != metadata.end(), IOError, "{}: not a strata-train checkpoint (no \"{}\" in its metadata)",
               path.string(), key);
  return it->second;
}

int64_t parse_count(const std::filesystem::path& path, const char* key, const std::string& text) {
  int64_t value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  STRATA_CHECK(ec == std::errc() && end == text.data() + text.size() && value >= 0, IOError,
               "{}: {} is \"{}\", not a count", path.string(), key, text);
  return value;
}

std::string generator_text(const GeneratorState& state) { return fmt::format("{} {}", state.seed, state.offset); }

GeneratorState parse_generator(const std::filesystem::path& path, const std::string& text) {
  GeneratorState state;
  STRATA_CHECK(std::sscanf(text.c_str(), "%" SCNu64 " %" SCNu64, &state.seed, &state.offset) == 2, IOError,
               "{}: generator is \"{}\", not a seed and an offset", path.string(), text);
  return state;
}

std::set<std::string> changed_settings(const std::filesystem::path& path, const io::Metadata& saved,
                                       const io::Metadata& ours, bool accept_changes,
                                       std::initializer_list<const char*> fixed, const char* why) {
  const std::string file = path.string();
  std::vector<std::string> differences;
  std::set<std::string> changed;
  for (const auto& [key, value] : ours) {
    const std::string theirs = metadata_value(path, saved, key.c_str());
    if (theirs == value) continue;
    differences.push_back(fmt::format("{} {} (this run: {})", key, theirs, value));
    changed.insert(key);
  }
  for (const char* key : fixed) {
    STRATA_CHECK(!changed.contains(key), InvalidArgumentError,
                 "{}: the checkpoint was written with {} {} but this run has {}; a run cannot change {} on resume ({})",
                 file, key, saved.at(key), ours.at(key), key, why);
  }
  STRATA_CHECK(differences.empty() || accept_changes, InvalidArgumentError,
               "{}: the checkpoint was written with other settings: {}; resume with the checkpoint's settings, or "
               "pass --resume-with-changes to continue with this run's (the result then matches no uninterrupted run)",
               file, fmt::join(differences, ", "));
  return changed;
}

uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = (seed * 1000003ull + a) * 1000003ull + b;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace strata::train
