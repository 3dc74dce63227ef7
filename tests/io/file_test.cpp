#include "strata/io/file.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/io/safetensors.h"
#include "strata/tensor/factories.h"
#include "test_files.h"

namespace strata {
namespace {

using io::detail::SavePoint;
using testing::TempDir;

// Where a save is killed: before any byte is written, between two tensors, after the fsync, after the temporary file
// got its name (unnamed files only), after the rename.
enum class KillPoint { BeforeWrite, MidWrite, AfterFsync, AfterLink, AfterRename };

std::vector<std::string> temporary_files(const TempDir& dir) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) out.push_back(name);
  }
  return out;
}

// Saves {"a", "b"} with metadata version=`version` in a child process that kills itself with SIGKILL at `point`.
// Returns whether the child died there (a point that never comes lets the save finish).
bool save_killed_at(const std::filesystem::path& path, KillPoint point, const std::string& version) {
  const io::TensorMap tensors{{"a", full({1000}, 1.0f)}, {"b", full({1000}, 2.0f)}};
  const pid_t child = ::fork();
  if (child == 0) {
    const auto die = [] { ::kill(::getpid(), SIGKILL); };
    if (point == KillPoint::MidWrite) {
      io::detail::set_save_hook([die](const std::string& name) {
        if (name == "b") die();
      });
    } else {
      const SavePoint at = point == KillPoint::BeforeWrite  ? SavePoint::Created
                           : point == KillPoint::AfterFsync ? SavePoint::Flushed
                           : point == KillPoint::AfterLink  ? SavePoint::Linked
                                                            : SavePoint::Renamed;
      // By value: the hook runs after this block has ended.
      io::detail::set_save_point_hook([die, at](SavePoint p) {
        if (p == at) die();
      });
    }
    try {
      io::save_safetensors(path, tensors, {{"version", version}});
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  EXPECT_GT(child, 0) << "fork failed";
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) << "status " << status;
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

// Kills a save at every point, and checks that the checkpoint is whole (old or new) and that no temporary file
// outlives the next save; `stray(point)` says whether one may stay until then.
template <typename Stray>
void expect_killed_saves_leave_nothing(Stray stray) {
  TempDir dir;
  const auto path = dir / "ck.safetensors";
  int version = 0;
  io::save_safetensors(path, {{"a", zeros({3})}}, {{"version", std::to_string(version)}});
  for (const KillPoint point : {KillPoint::BeforeWrite, KillPoint::MidWrite, KillPoint::AfterFsync,
                                KillPoint::AfterLink, KillPoint::AfterRename}) {
    SCOPED_TRACE(fmt::format("killed at point {}", static_cast<int>(point)));
    const bool killed = save_killed_at(path, point, std::to_string(version + 1));
    if (!killed || point == KillPoint::AfterRename) ++version;
    EXPECT_EQ(io::load_safetensors(path).metadata.at("version"), std::to_string(version));
    EXPECT_EQ(temporary_files(dir).size(), killed && stray(point) ? 1u : 0u);
    // The next save, by another process, removes what the dead one left.
    io::save_safetensors(path, {{"a", zeros({3})}}, {{"version", std::to_string(++version)}});
    EXPECT_TRUE(temporary_files(dir).empty());
    EXPECT_EQ(io::load_safetensors(path).metadata.at("version"), std::to_string(version));
  }
}

TEST(AtomicFile, KilledSavesOfUnnamedFilesLeaveNoStrayFile) {
  TempDir dir;
  if (!io::AtomicFile(dir / "probe", "probe").unnamed()) GTEST_SKIP() << "the temp directory has no O_TMPFILE";
  // Only between the link and the rename, an instant, does the file have a name that a kill can leave.
  expect_killed_saves_leave_nothing([](KillPoint p) { return p == KillPoint::AfterLink; });
}

TEST(AtomicFile, KilledSavesOfNamedFilesLeaveAFileThatTheNextSaveRemoves) {
  io::detail::set_unnamed_temporaries(false);
  expect_killed_saves_leave_nothing([](KillPoint p) { return p != KillPoint::AfterRename; });
  io::detail::set_unnamed_temporaries(true);
}

TEST(AtomicFile, OnlyTemporaryFilesOfDeadProcessesAreRemoved) {
  TempDir dir;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // `child` is now a pid without a process
  const std::vector<std::string> kept = {fmt::format("ck.safetensors.tmp-{}-0", ::getpid()),  // a save under way
                                         fmt::format("other.safetensors.tmp-{}-0", child),    // another file's
                                         "ck.safetensors.tmp-abc-0", "ck.safetensors.tmp-12-x", "ck.safetensors"};
  for (const std::string& name : kept) testing::write_file(dir / name, {1});
  testing::write_file(dir / fmt::format("ck.safetensors.tmp-{}-7", child), {1});
  testing::write_file(dir / fmt::format("ck.safetensors.tmp-{}-u3", child), {1});
  EXPECT_EQ(io::remove_stale_temporaries(dir / "ck.safetensors"), 2);
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    left.push_back(entry.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  std::vector<std::string> expected = kept;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(left, expected);
}

// The message of the IOError that taking `path`'s lock throws ("" when none).
std::string lock_error(const std::filesystem::path& path) {
  try {
    io::FileLock lock(path, "test");
  } catch (const IOError& e) {
    return e.what();
  }
  return "";
}

TEST(FileLock, ASecondTakerIsRefusedNamingTheHolder) {
  TempDir dir;
  io::FileLock held(dir / "ck.lock", "test");
  const std::string error = lock_error(dir / "ck.lock");
  EXPECT_NE(error.find(fmt::format("'{}' is held by process {}", (dir / "ck.lock").string(), ::getpid())),
            std::string::npos)
      << error;
}

TEST(FileLock, ReleasingRemovesTheFileAndFreesTheLock) {
  TempDir dir;
  { io::FileLock held(dir / "ck.lock", "test"); }
  EXPECT_FALSE(std::filesystem::exists(dir / "ck.lock"));
  EXPECT_EQ(lock_error(dir / "ck.lock"), "");
}

TEST(FileLock, TheLockDiesWithItsProcess) {
  TempDir dir;
  const auto path = dir / "ck.lock";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    io::FileLock held(path, "child");
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  ASSERT_GT(child, 0);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_NE(lock_error(path).find(fmt::format("held by process {}", child)), std::string::npos) << lock_error(path);
  ::kill(child, SIGKILL);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  // Its file stays, with a dead pid in it; the lock does not.
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(lock_error(path), "");
}

}  // namespace
}  // namespace strata
