#pragma once

// What strata::jit reads in a kernel's source before any compiler sees it: the __global__ functions with their
// parameters (to check a launch's arguments on every device), whether each uses a block barrier, and the CPU
// dialect's rewrite of the source (jit/cpu_dialect.h). A scanner, not a C++ parser: it skips comments, string and
// character literals and preprocessor lines, matches brackets, and leaves everything else to the compiler, whose
// errors come back with the user's line numbers.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/dtype.h"

namespace strata::jit {

/// One parameter of a kernel as declared: `const float* __restrict__ x` is pointer to F32, const, named "x".
struct KernelParam {
  std::string name;  // empty when unnamed
  std::string type;  // the declaration without the name, as written ("const float*")
  bool pointer = false;
  bool is_const = false;     // a pointer to const: the kernel only reads through it
  bool supported = false;    // a type a launch can pass: a pointer to, or a value of, one of Strata's dtypes
  DType dtype = DType::F32;  // the element type (pointers) or the value's type (scalars), when supported
  int bits = 0;              // the C type's width, for scalars: `unsigned` and `int` are both 32
  bool is_unsigned = false;
};

/// A __global__ function of the source.
struct KernelDecl {
  std::string name;
  std::vector<KernelParam> params;
  int line = 0;                // where its name is, 1-based
  bool uses_barrier = false;   // __syncthreads() appears in its body
  bool is_template = false;    // cannot be launched by name
  std::size_t head_begin = 0;  // the span `extern "C" __global__ void` (or `__global__ void`), rewritten for the CPU
  std::size_t head_end = 0;
  std::size_t params_begin = 0;  // the text between the parentheses of the parameter list
  std::size_t params_end = 0;
};

/// Everything found in a source.
struct SourceInfo {
  std::vector<KernelDecl> kernels;
  /// Lines where __syncthreads() appears outside any __global__ function (the CPU dialect cannot run those).
  std::vector<int> barriers_outside_kernels;
  /// threadIdx, blockIdx, blockDim or gridDim appear outside the __global__ functions (in a __device__ function).
  bool index_outside_kernels = false;
  /// `extern __shared__ T name[];` declarations: the span, the element type and name, and whether at file scope.
  struct DynamicShared {
    std::size_t begin = 0, end = 0;
    std::string type, name;
    bool file_scope = false;
  };
  std::vector<DynamicShared> dynamic_shared;
};

/// Scans `source`; never throws for malformed text (the compiler reports that), only for text too large (over
/// 16 MiB) or brackets nested deeper than 10 000.
SourceInfo scan_source(std::string_view source);

/// The kernel named `name`, or an InvalidArgumentError listing the names the source defines.
const KernelDecl& find_kernel(const SourceInfo& info, std::string_view name);

/// The source as the CPU dialect compiles it: kernels with a barrier become coroutines, the others static inline
/// functions that take the thread's index as a hidden first parameter (Note [The thread index on the CPU] in
/// jit/cpu_dialect.h), and `extern __shared__` arrays point at the launch's dynamic shared memory. Line numbers do not
/// move.
std::string rewrite_for_cpu(std::string_view source, const SourceInfo& info);

}  // namespace strata::jit
