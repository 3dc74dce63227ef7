// A small training program, as a user writes one: the reference Fashion-MNIST network trained with SGD for a few
// steps. strata-bench times compiling and linking this file against the build tree (workload "startup"); it is
// also built as strata-bench-small-train so that it always compiles.
#include <strata/strata.h>

#include <cstdio>
#include <memory>

using namespace strata;
namespace F = strata::nn::functional;

int main(int argc, char** argv) try {
  const char* dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  auto train_set = std::make_shared<data::FashionMnist>(dir, data::Split::Train);
  auto net = std::make_shared<nn::Sequential>();
  net->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 32, 3).padding(1)));
  net->push_back(std::make_shared<nn::ReLU>());
  net->push_back(std::make_shared<nn::MaxPool2d>(nn::MaxPool2dOptions(2)));
  net->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(32, 64, 3).padding(1)));
  net->push_back(std::make_shared<nn::ReLU>());
  net->push_back(std::make_shared<nn::MaxPool2d>(nn::MaxPool2dOptions(2)));
  net->push_back(std::make_shared<nn::Flatten>());
  net->push_back(std::make_shared<nn::Linear>(64 * 7 * 7, 128));
  net->push_back(std::make_shared<nn::ReLU>());
  net->push_back(std::make_shared<nn::Linear>(128, 10));
  optim::SGD sgd(net->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  data::DataLoaderOptions options;
  options.batch_size = 64;
  options.shuffle = true;
  options.scale_bytes = true;
  data::DataLoader loader(train_set, options);
  int steps = 0;
  for (const data::Batch& batch : loader) {
    const Tensor loss = F::cross_entropy((*net)(batch.data.unsqueeze(1)), batch.target);
    sgd.zero_grad();
    loss.backward();
    sgd.step();
    if (++steps == 10) {
      std::printf("loss after %d steps: %.4f\n", steps, loss.item<float>());
      break;
    }
  }
  return 0;
} catch (const strata::Error& e) {
  std::fprintf(stderr, "small_train: %s\n", e.what());
  return 1;
}
