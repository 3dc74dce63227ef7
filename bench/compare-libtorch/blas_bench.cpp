// The raw-library baselines of the sgemm target (issue 6: ">= 1.0x the best of OpenBLAS/oneDNN for n >= 128"):
// square f32 C = A.B with oneDNN's dnnl_sgemm or OpenBLAS's cblas_sgemm, each on its own threads, timed as
// torch_bench and strata-bench time their matmul, printed as torch_bench's JSON with the same metric keys:
// {"tool": "onednn" | "openblas", "workloads": {"matmul": {"metrics": {"matmul_cpu_n256": {...}, ...}}}}.
// Built and run by bench/compare-libtorch/run, one process per library so that the idle threads of one library's
// pool never spin beside the other's work; arguments: --library onednn|openblas [--quick].
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

// OpenBLAS's own entry points; declared here too in case <cblas.h> is another implementation's.
extern "C" {
int openblas_get_num_threads(void);
int openblas_get_parallel(void);
char* openblas_get_config(void);
char* openblas_get_corename(void);
}

#include "common.h"

namespace {

using compare::environment;
using compare::seconds_per_call;

using Sgemm = std::function<void(int64_t n, const float* a, const float* b, float* c)>;

void onednn_sgemm(int64_t n, const float* a, const float* b, float* c) {
  if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) != dnnl_success) {
    throw std::runtime_error("dnnl_sgemm failed");
  }
}

void openblas_sgemm(int64_t n, const float* a, const float* b, float* c) {
  const int ni = static_cast<int>(n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a, ni, b, ni, 0.0f, c, ni);
}

// As torch_bench's matmul (operands uniform in [0, 1)), except that C is written in place: the libraries'
// interface. Strata's and LibTorch's figures include allocating the result.
nlohmann::json matmul(const Sgemm& sgemm, bool quick) {
  nlohmann::json m;
  const std::vector<int64_t> sizes =
      quick ? std::vector<int64_t>{64, 256, 512} : std::vector<int64_t>{64, 128, 256, 512, 1024, 2048, 4096};
  std::mt19937 gen(0);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (int64_t n : sizes) {
    std::vector<float> a(n * n), b(n * n), c(n * n);
    for (float& x : a) x = uniform(gen);
    for (float& x : b) x = uniform(gen);
    const double s = seconds_per_call([&] { sgemm(n, a.data(), b.data(), c.data()); }, quick ? 3 : 5);
    m["matmul_cpu_n" + std::to_string(n)] = {
        {"value", 2.0 * n * n * n / s / 1e9}, {"unit", "GFLOP/s"}, {"better", "higher"}};
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::string library;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--library" && i + 1 < argc) {
      library = argv[++i];
    } else {
      std::fprintf(stderr, "blas_bench: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  nlohmann::json out{{"tool", library}, {"environment", environment()}};
  Sgemm sgemm;
  if (library == "onednn") {
    const dnnl_version_t* v = dnnl_version();
    out["version"] = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    // Debian's oneDNN runs on OpenMP: its threads are OpenMP's.
    out["threads"] = v->cpu_runtime == DNNL_RUNTIME_OMP ? omp_get_max_threads() : -1;
    out["parallel_info"] = v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "runtime " + std::to_string(v->cpu_runtime);
    sgemm = onednn_sgemm;
  } else if (library == "openblas") {
    static const char* const kParallel[] = {"sequential", "pthreads", "OpenMP"};
    const int parallel = openblas_get_parallel();
    out["version"] = openblas_get_config();
    out["threads"] = openblas_get_num_threads();
    out["parallel_info"] = std::string(parallel >= 0 && parallel <= 2 ? kParallel[parallel] : "unknown") +
                           ", kernels for " + openblas_get_corename();
    sgemm = openblas_sgemm;
  } else {
    std::fprintf(stderr, "blas_bench: --library onednn or --library openblas, not '%s'\n", library.c_str());
    return 2;
  }
  std::fprintf(stderr, "blas_bench: running matmul on %s (%d threads) ...\n", library.c_str(),
               out["threads"].get<int>());
  out["workloads"] = {{"matmul", {{"metrics", matmul(sgemm, quick)}}}};
  std::cout << out.dump(2) << "\n";
  return 0;
}
