// The smallest LibTorch program, one tensor op: torch_bench spawns it to time start-up to the first op's result.
#include <torch/torch.h>

int main() {
  const auto c = torch::ones({16}) + torch::ones({16});
  return c.data_ptr<float>()[0] == 2.0f ? 0 : 1;
}
