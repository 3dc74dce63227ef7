// The CPU thread pool (runtime/parallel.h): Note [One CPU thread pool].
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>

#include "strata/runtime/parallel.h"

namespace strata {
namespace {

// The OpenBLAS libstrata loaded must bring no threads of its own (the pthread build's spin for ~0.1 s after it is
// loaded and stall our parallel regions meanwhile), and telling it to use one thread must leave our pool whole
// (the OpenMP build passes its count on to omp_set_num_threads).
TEST(OneCpuThreadPool, OpenBlasRunsOnOurPoolAndLeavesItWhole) {
  const int threads = num_threads();
  EXPECT_EQ(omp_get_max_threads(), threads);
#if STRATA_OPENBLAS_OPENMP
  using GetParallel = int();
  auto* get_parallel = reinterpret_cast<GetParallel*>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  ASSERT_NE(get_parallel, nullptr) << "no OpenBLAS in the process";
  EXPECT_EQ(get_parallel(), 2) << "OpenBLAS is not the OpenMP build (0: serial, 1: pthreads)";
#else
  GTEST_SKIP() << "built without Debian's OpenMP build of OpenBLAS (libopenblas0-openmp)";
#endif
}

}  // namespace
}  // namespace strata
