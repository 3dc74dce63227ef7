#include <cstdio>

#include "strata/runtime/cuda.h"

int main() {
  std::printf("CUDA: %s\n", strata::cuda::is_available() ? "available" : strata::cuda::unavailable_reason().c_str());
  return 0;
}
