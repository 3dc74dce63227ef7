#pragma once

// The seam between the run-time compiler (strata::jit, in libstrata) and a GPU plugin, which compiles kernels with
// its vendor's run-time compiler (NVRTC for CUDA, hiprtc for HIP, each loaded with dlopen) and loads and launches
// what it compiled. libstrata parses the source, checks arguments, keeps the disk cache and runs CPU kernels itself.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/core/device.h"
#include "strata/runtime/backend.h"

namespace strata::jit {

/// Grid or block sizes, as CUDA's dim3.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// What a GPU compiler is asked for: the source as the user wrote it (its dialect prelude is the compiler's to
/// add), a file name for messages, the user's options, and the architecture ("sm_90", "gfx90a").
struct CompileRequest {
  std::string source;
  std::string file_name;
  std::vector<std::string> options;
  std::string arch;
};

/// A compiled module: the binary to load (cubin, PTX or a code object) and the compiler's log (warnings).
struct CompileResult {
  std::string binary;
  std::string log;
};

/// What a failed assert(cond) in a compiled kernel recorded (Note [The JIT's device-side assert] in gpu_dialect.h):
/// the source line and file as the user wrote them, the condition's text, and the function the assert is in (the
/// kernel's extern "C" name, or a __device__ helper's).
struct AssertFailure {
  int line = 0;
  std::string file;
  std::string function;
  std::string condition;
};

/// A module loaded on one device.
class LoadedModule {
 public:
  virtual ~LoadedModule() = default;
  /// Launches kernel `name` on `stream` (nullptr: the default stream); args[i] points at the i-th argument's value,
  /// as cuLaunchKernel takes them. Throws BackendError naming the kernel when the launch is refused.
  virtual void launch(const std::string& name, Dim3 grid, Dim3 block, std::size_t shared_bytes, NativeStream stream,
                      void** args) = 0;
  /// After a synchronisation of work that ran this module's kernels failed: the first assert that failed in them,
  /// if one did, read without any GPU call (the context may be lost). Returns it once; later asserts of the module
  /// are not recorded, since the first one's trap already lost the context.
  virtual std::optional<AssertFailure> take_assert_failure() { return std::nullopt; }
};

/// A plugin's run-time compiler (Note [The GPU half of the run-time compiler] in the plugin).
class DeviceCompiler {
 public:
  virtual ~DeviceCompiler() = default;
  /// The compiler's name and version, "NVRTC 13.0": part of the disk cache's key.
  virtual std::string identity() const = 0;
  /// The architecture that device `index` runs ("sm_90", "gfx90a"); needs the device.
  virtual std::string device_arch(int index) const = 0;
  /// Compiles; throws jit::CompileError carrying the compiler's log. Needs no device.
  virtual CompileResult compile(const CompileRequest& request) const = 0;
  /// Loads a binary made by compile() onto device `index`; throws BackendError when the driver refuses it (the cache
  /// then removes the entry and compiles again).
  virtual std::unique_ptr<LoadedModule> load(int index, const std::string& binary) const = 0;
  /// The most dynamic shared memory a block may ask for on device `index`, and the most threads in a block.
  virtual std::size_t max_shared_bytes(int index) const = 0;
  virtual int max_block_threads(int index) const = 0;
};

/// A plugin exports `extern "C" strata::jit::DeviceCompiler* strata_create_jit_compiler(std::string* why_not)`:
/// it returns a new compiler (the caller owns it) or nullptr with a one-line reason (no NVRTC: say how to get it).
/// It must work on a machine without the device or its driver, so that kernels compile for a named target there.
using CreateCompilerFn = DeviceCompiler* (*)(std::string* why_not);
inline constexpr const char* kCreateCompilerSymbol = "strata_create_jit_compiler";

/// The compiler of a GPU device type's plugin (loaded once), or the error saying why there is none.
DeviceCompiler& device_compiler(DeviceType type);

}  // namespace strata::jit
