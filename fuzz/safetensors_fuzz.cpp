// libFuzzer harness for load_safetensors (header and loader): the input is the file. Every input must load, or be
// refused with an IOError; anything else (a crash, a sanitizer report, another exception) is a finding. A file that
// loads must also survive a round trip: saved again and reloaded, it holds the same tensors and metadata.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "memory_file.h"
#include "strata/core/error.h"
#include "strata/io/safetensors.h"

namespace {

using strata::io::SafetensorsContent;

// Where round trips are saved: a directory of their own, on tmpfs when there is one.
std::filesystem::path& scratch() {
  static std::filesystem::path dir;
  return dir;
}

void remove_scratch() {
  std::error_code ec;
  std::filesystem::remove_all(scratch(), ec);
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "safetensors fuzz: %s\n", what.c_str());
  std::abort();
}

void expect_same(const SafetensorsContent& a, const SafetensorsContent& b) {
  if (a.metadata != b.metadata) finding("the metadata changed in a round trip");
  if (a.tensors.size() != b.tensors.size()) finding("the number of tensors changed in a round trip");
  for (auto i = a.tensors.begin(), j = b.tensors.begin(); i != a.tensors.end(); ++i, ++j) {
    const strata::Tensor& x = i->second;
    const strata::Tensor& y = j->second;
    if (i->first != j->first || x.dtype() != y.dtype() || x.shape() != y.shape()) {
      finding("tensor '" + i->first + "' changed name, dtype or shape in a round trip");
    }
    const auto bytes = static_cast<std::size_t>(x.numel()) * x.element_size();
    if (bytes > 0 && std::memcmp(x.data_ptr(), y.data_ptr(), bytes) != 0) {
      finding("tensor '" + i->first + "' changed its bytes in a round trip");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::filesystem::path base = std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                               : std::filesystem::temp_directory_path();
  std::string pattern = (base / "strata-fuzz-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) finding("cannot create a scratch directory in " + base.string());
  scratch() = pattern;
  std::atexit(remove_scratch);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static strata::fuzz::MemoryFile file;
  file.set(data, size);
  SafetensorsContent loaded;
  try {
    loaded = strata::io::load_safetensors(file.path());
  } catch (const strata::IOError&) {
    return 0;
  }
  for (const auto& [name, t] : loaded.tensors) {
    if (t.strides() != strata::contiguous_strides(t.shape()) || !t.device().is_cpu()) {
      finding("tensor '" + name + "' loaded strided or off the CPU");
    }
  }
  const std::filesystem::path copy = scratch() / "round-trip.safetensors";
  strata::io::save_safetensors(copy, loaded.tensors, loaded.metadata);
  expect_same(loaded, strata::io::load_safetensors(copy));
  return 0;
}
