// strata-bench-first-op: the smallest Strata program, one tensor op. strata-bench spawns it to time process
// start-up up to the first op's result (workload "startup").
#include <strata/strata.h>

int main() {
  const strata::Tensor c = strata::ones({16}) + strata::ones({16});
  return c.data<float>()[0] == 2.0f ? 0 : 1;
}
