// strata-bench-first-op: the smallest Strata program, one tensor op. strata-bench spawns it to time process
// start-up up to the first op's result (workload "startup").
#include <strata/strata.h>

#include <cstdio>

int main() {
  try {
    const strata::Tensor c = strata::ones({16}) + strata::ones({16});
    return c.data<float>()[0] == 2.0f ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-bench-first-op: %s\n", e.what());
    return 1;
  }
}
