// The loader's check of a plugin's ABI version (Note [The plugin ABI version] in runtime/plugin.h): a plugin built for
// another libstrata is refused, with a reason naming the file, its version and the expected one.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "runtime/plugin_entry.h"
#include "strata/runtime/plugin.h"

namespace strata {
namespace {

// Puts `folder` first in STRATA_BACKEND_PATH until the end of the scope.
class BackendPathFirst {
 public:
  explicit BackendPathFirst(const std::string& folder) {
    if (const char* old = std::getenv("STRATA_BACKEND_PATH")) old_ = old;
    const std::string path = old_ ? folder + ":" + *old_ : folder;
    setenv("STRATA_BACKEND_PATH", path.c_str(), 1);
  }
  ~BackendPathFirst() {
    if (old_) {
      setenv("STRATA_BACKEND_PATH", old_->c_str(), 1);
    } else {
      unsetenv("STRATA_BACKEND_PATH");
    }
  }

 private:
  std::optional<std::string> old_;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(PluginAbi, APluginOfAnotherVersionIsRefusedNamingTheFileAndBothVersions) {
  // tests/CMakeLists.txt builds tests/runtime/wrong_abi_plugin.cpp as libstrata_hip.so in a folder of its own.
  const std::filesystem::path folder = STRATA_TEST_WRONG_ABI_PLUGIN_DIR;
  ASSERT_TRUE(std::filesystem::exists(folder / plugin_file(DeviceType::HIP))) << folder;
  BackendPathFirst path(folder.string());
  std::string reason;
  EXPECT_EQ(open_plugin(DeviceType::HIP, reason), nullptr);
  EXPECT_TRUE(contains(reason, "the HIP plugin " + (folder / "libstrata_hip.so").string())) << reason;
  EXPECT_TRUE(contains(reason, fmt::format("has plugin ABI version {}, but this libstrata expects version {}",
                                           kPluginAbiVersion + 1, kPluginAbiVersion)))
      << reason;
  EXPECT_TRUE(contains(reason, "rebuild the plugin")) << reason;
  EXPECT_FALSE(contains(reason, "entry point")) << "the entry point was reached: " << reason;
  EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
}

TEST(PluginAbi, ALibraryWithoutAVersionIsRefused) {
  void* program = dlopen(nullptr, RTLD_NOW);  // the test binary: a library that exports no strata_plugin_abi_version
  ASSERT_NE(program, nullptr);
  std::string reason;
  EXPECT_FALSE(check_plugin_abi(program, "/some/libstrata_cuda.so", DeviceType::CUDA, reason));
  EXPECT_TRUE(contains(reason, "the CUDA plugin /some/libstrata_cuda.so has no strata_plugin_abi_version")) << reason;
  EXPECT_TRUE(contains(reason, fmt::format("expects plugin ABI version {}", kPluginAbiVersion))) << reason;
}

TEST(PluginAbi, TheBuiltPluginsCarryThisVersion) {
  int checked = 0;
  for (const DeviceType type : {DeviceType::CUDA, DeviceType::HIP}) {
    const auto file = testing::find_plugin(type);
    if (file.empty()) continue;
    // The HIP plugin links the HIP runtime: where that is missing the plugin cannot be opened, nor its version read.
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) continue;
    std::string reason;
    EXPECT_TRUE(check_plugin_abi(handle, file, type, reason)) << reason;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "this build has no GPU plugin that opens here";
}

}  // namespace
}  // namespace strata
