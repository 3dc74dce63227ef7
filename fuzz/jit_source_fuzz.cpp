// libFuzzer harness for what strata::jit does to a kernel's source before a compiler sees it: scan_source (the
// kernels, their parameters, barriers, extern __shared__), find_kernel and the CPU dialect's rewrite. Every input
// must be scanned and rewritten, or refused with an InvalidArgumentError; anything else is a finding. The compilers
// themselves are not run here (a compile takes a second); their errors reach the user as CompileError.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "strata/core/error.h"
#include "strata/jit/source.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "jit source fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    const strata::jit::SourceInfo info = strata::jit::scan_source(source);
    for (const strata::jit::KernelDecl& k : info.kernels) {
      if (k.head_begin > k.head_end || k.head_end > size) finding("a kernel's head is outside the source");
      if (k.line < 1) finding("a kernel without a line");
      (void)strata::jit::find_kernel(info, k.name);
    }
    for (const auto& d : info.dynamic_shared) {
      if (d.begin > d.end || d.end > size) finding("an extern __shared__ span is outside the source");
    }
    const std::string rewritten = strata::jit::rewrite_for_cpu(source, info);
    if (info.kernels.empty() && info.dynamic_shared.empty() && rewritten != source) {
      finding("a source with nothing to rewrite changed");
    }
    try {
      (void)strata::jit::find_kernel(info, "no_such_kernel_name_here");
    } catch (const strata::InvalidArgumentError&) {
    }
  } catch (const strata::InvalidArgumentError&) {
  }
  return 0;
}
