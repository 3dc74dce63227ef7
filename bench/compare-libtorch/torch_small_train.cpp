// tools/bench/small_train.cpp written against LibTorch: the reference network trained with SGD for a few steps.
// bench/compare-libtorch/run times compiling and linking it, as strata-bench times its Strata twin.
#include <torch/torch.h>

#include <cstdio>

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  auto dataset = torch::data::datasets::MNIST(dir).map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(64));
  torch::nn::Sequential net(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)), torch::nn::ReLU(),
                            torch::nn::MaxPool2d(2), torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)),
                            torch::nn::ReLU(), torch::nn::MaxPool2d(2), torch::nn::Flatten(),
                            torch::nn::Linear(64 * 7 * 7, 128), torch::nn::ReLU(), torch::nn::Linear(128, 10));
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  int steps = 0;
  for (auto& batch : *loader) {
    const auto loss = torch::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
    sgd.zero_grad();
    loss.backward();
    sgd.step();
    if (++steps == 10) {
      std::printf("loss after %d steps: %.4f\n", steps, loss.item<float>());
      break;
    }
  }
  return 0;
}
