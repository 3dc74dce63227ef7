#pragma once

// strata::jit: kernels written in CUDA's kernel dialect, compiled while the program runs, on the CPU (the host C++
// compiler), NVIDIA GPUs (NVRTC) and AMD GPUs (hiprtc), as CuPy's RawKernel takes them:
//
//   strata::jit::RawKernel add(R"(
//     extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
//       int i = blockIdx.x * blockDim.x + threadIdx.x;
//       if (i < n) c[i] = a[i] + b[i];
//     })", "add");
//   add({(n + 255) / 256}, {256}, {a, b, c, n});   // on the device of a, b and c
//
// See docs/architecture.md, "Kernels compiled at run time".

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "strata/core/scalar.h"
#include "strata/jit/compiler.h"
#include "strata/jit/source.h"
#include "strata/tensor/tensor.h"

namespace strata::jit {

/// What a kernel is compiled for: the CPU, or a GPU architecture ("sm_90" for CUDA, "gfx90a" for HIP).
struct Target {
  DeviceType type = DeviceType::CPU;
  std::string arch;  // empty for the CPU (this machine's)
  /// "cpu", "cuda:sm_90", "hip:gfx90a"; InvalidArgumentError for anything else.
  static Target parse(const std::string& text);
  std::string to_string() const;
};

/// One argument of a launch: a tensor (passed as a pointer to its first element) or a number (converted to the
/// parameter's declared type).
class KernelArg {
 public:
  KernelArg(Tensor tensor) : value_(std::move(tensor)) {}  // NOLINT(google-explicit-constructor): a launch's list
  KernelArg(Scalar number) : value_(number) {}             // NOLINT(google-explicit-constructor)
  template <typename T>
  requires std::is_arithmetic_v<T> KernelArg(T number)
      : value_(Scalar(number)) {}  // NOLINT(google-explicit-constructor)
  bool is_tensor() const { return std::holds_alternative<Tensor>(value_); }
  const Tensor& tensor() const { return std::get<Tensor>(value_); }
  const Scalar& number() const { return std::get<Scalar>(value_); }

 private:
  std::variant<Tensor, Scalar> value_;
};

/// A compiled module's bytes, as compile() returns them.
struct Compiled {
  std::string binary;  // a shared object (CPU), a cubin or PTX (CUDA), a code object (HIP)
  std::string log;     // the compiler's warnings
  bool from_cache = false;
};

/// Compiles `source` for `target` without launching anything: no device is needed, so the NVRTC and hiprtc paths
/// can be checked on any machine. Throws CompileError with the compiler's log.
Compiled compile(const std::string& source, const Target& target, const std::vector<std::string>& options = {});

/// A kernel of a source, compiled for each device type and architecture at its first launch there (and kept in
/// memory and in the disk cache). Copies share the compiled modules. Safe to launch from several threads.
class RawKernel {
 public:
  /// Scans the source and finds `name` in it (InvalidArgumentError listing the kernels otherwise); compiles
  /// nothing yet. With `disk_cache` false the compiled module is neither looked for in nor written to the disk
  /// cache (it is still kept in memory by this kernel and its copies).
  RawKernel(std::string source, std::string name, std::vector<std::string> options = {}, bool disk_cache = true);

  /// Launches grid x block threads with `shared_bytes` of dynamic shared memory per block, on the device of the
  /// tensor arguments (the CPU when there are none), on that device's current stream.
  void operator()(Dim3 grid, Dim3 block, const std::vector<KernelArg>& args, std::size_t shared_bytes = 0) const;

  /// Compiles for `device` now (a launch would), so that the first launch does not pay for it.
  void compile_for(Device device) const;

  const std::string& name() const;
  const KernelDecl& declaration() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// The disk cache of compiled kernels ($STRATA_KERNEL_CACHE, else $XDG_CACHE_HOME/strata/kernels or
/// ~/.cache/strata/kernels; STRATA_KERNEL_CACHE=off turns it off).
struct CacheStats {
  int64_t hits = 0;       // compiled modules found on disk
  int64_t misses = 0;     // compiled because not found (or the cache is off)
  int64_t discarded = 0;  // entries found corrupt or unloadable, removed and compiled again
};
CacheStats cache_stats();
/// The cache's folder, or an empty path when it is off or could not be made (then kernels compile every time).
std::string cache_folder();

}  // namespace strata::jit
