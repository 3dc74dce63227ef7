#pragma once

// The disk cache of kernels compiled at run time (Note [The kernel cache] in kernel_cache.cpp).

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace strata::jit::detail {

/// The compiled entry for `key`: open(path) of the file in the cache when it is there and opens (a corrupt or
/// unloadable one is removed), else build(path) writes it, under an flock that makes concurrent processes compile it
/// once, and open(path) reads it back. With the cache off or unwritable, the entry is built in a private temporary
/// folder and removed once opened, as it is with `use_disk` false (a kernel made with the disk cache off). `open`
/// returns std::nullopt for an entry it cannot use. `*hit`, when given, says whether the entry came from the cache.
template <typename T>
T cached(const std::string& key, const std::string& suffix,
         const std::function<void(const std::filesystem::path&)>& build,
         const std::function<std::optional<T>(const std::filesystem::path&)>& open, bool use_disk = true,
         bool* hit = nullptr);

/// The untyped core of cached(): returns the path of a valid entry, or of a temporary one (`temporary` set) that the
/// caller removes after opening. `valid` is called on an existing entry and caches what it opened.
std::filesystem::path cached_path(const std::string& key, const std::string& suffix,
                                  const std::function<void(const std::filesystem::path&)>& build,
                                  const std::function<bool(const std::filesystem::path&)>& valid, bool& temporary,
                                  bool use_disk = true, bool* hit = nullptr);

/// Removes an entry that loaded from disk but that the device then refused (the next compile rebuilds it).
void discard(const std::string& key, const std::string& suffix);

/// Throws the CompileError for a freshly built entry that does not open.
[[noreturn]] void throw_unopenable(const std::filesystem::path& path);

template <typename T>
T cached(const std::string& key, const std::string& suffix,
         const std::function<void(const std::filesystem::path&)>& build,
         const std::function<std::optional<T>(const std::filesystem::path&)>& open, bool use_disk, bool* hit) {
  std::optional<T> opened;
  bool temporary = false;
  const std::filesystem::path path = cached_path(
      key, suffix, build,
      [&](const std::filesystem::path& p) {
        opened = open(p);
        return opened.has_value();
      },
      temporary, use_disk, hit);
  if (!opened) opened = open(path);
  if (temporary) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
  if (!opened) throw_unopenable(path);
  return std::move(*opened);
}

}  // namespace strata::jit::detail
