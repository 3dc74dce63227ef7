// Data-parallel training on every device of this machine, as in Dive into Deep Learning's "Multiple GPUs" chapter:
// a replica of the network on each device, each minibatch split across them, the gradients summed, every replica
// stepped. It runs on two GPUs, a GPU and the CPU, or two virtual CPU devices (STRATA_CPU_DEVICES=2), and checks
// that it trains the same network as one device does on the same global batches.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <strata/strata.h>

using namespace strata;

namespace {

// The reference network of strata-train: two convolutions and two dense layers, for 28x28 grey images.
std::shared_ptr<nn::Sequential> network(Device device) {
  manual_seed(42);  // every replica starts from the same weights (d2l: get_params, then copied to each device)
  auto net = std::make_shared<nn::Sequential>(
      nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(nn::MaxPool2dOptions(2)),
      nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(nn::MaxPool2dOptions(2)),
      nn::Flatten(), nn::Linear(64 * 7 * 7, 128), nn::ReLU(), nn::Linear(128, 10));
  net->to(device);
  return net;
}

struct Replica {
  Device device;
  std::shared_ptr<nn::Sequential> net;
  std::unique_ptr<optim::SGD> optimizer;
};

// d2l: allreduce. Sums every replica's gradient on the first device, then gives each replica the sum.
void allreduce_gradients(std::vector<Replica>& replicas) {
  const auto first = replicas[0].net->parameters();
  for (std::size_t p = 0; p < first.size(); ++p) {
    Tensor total = first[p].grad();
    for (std::size_t r = 1; r < replicas.size(); ++r) total = total + replicas[r].net->parameters()[p].grad().to(total.device());
    for (Replica& replica : replicas) replica.net->parameters()[p].set_grad(total.to(replica.device));
  }
}

// One step on the global batch: each device takes an equal share of the rows (d2l: split_and_load).
double train_step(std::vector<Replica>& replicas, const Tensor& images, const Tensor& labels) {
  const int64_t batch = images.size(0);
  const auto devices = static_cast<int64_t>(replicas.size());
  double loss_sum = 0;
  for (int64_t r = 0; r < devices; ++r) {
    const int64_t begin = batch * r / devices, end = batch * (r + 1) / devices;
    Replica& replica = replicas[static_cast<std::size_t>(r)];
    replica.optimizer->zero_grad();
    const Tensor x = images.narrow(0, begin, end - begin).to(replica.device);
    const Tensor y = labels.narrow(0, begin, end - begin).to(replica.device);
    // Each share's loss is its sum over the global batch size, so the summed gradients are those of the batch mean.
    const Tensor loss = nn::functional::cross_entropy(replica.net->forward(x), y, nn::functional::Reduction::Sum) /
                        static_cast<double>(batch);
    loss.backward();
    loss_sum += loss.item<double>();
  }
  allreduce_gradients(replicas);
  for (Replica& replica : replicas) replica.optimizer->step();
  return loss_sum;
}

std::vector<Replica> replicas_on(const std::vector<Device>& devices) {
  std::vector<Replica> replicas;
  for (Device device : devices) {
    auto net = network(device);
    auto optimizer = std::make_unique<optim::SGD>(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    replicas.push_back({device, std::move(net), std::move(optimizer)});
  }
  return replicas;
}

// Fashion-MNIST where it is installed; otherwise images of noise with a class-dependent brightness, so that the
// loss still falls.
std::pair<Tensor, Tensor> training_data(int64_t n) {
  if (std::filesystem::exists(std::filesystem::path(data::kFashionMnistDir) / "train-images-idx3-ubyte.gz")) {
    const data::FashionMnist train;
    const Tensor images = train.images().narrow(0, 0, n).to(DType::F32).unsqueeze(1) / 255.0;
    return {images, train.labels().narrow(0, 0, n)};
  }
  std::printf("(Fashion-MNIST is not installed in %s: using synthetic images)\n",
              std::string(data::kFashionMnistDir).c_str());
  manual_seed(7);
  const Tensor labels = randint(0, 10, {n});
  const Tensor images = rand({n, 1, 28, 28}) * 0.5 + labels.to(DType::F32).reshape({n, 1, 1, 1}) / 20.0;
  return {images, labels};
}

}  // namespace

int main() try {
  std::vector<Device> devices;  // every device: the CPU devices, then every GPU
  for (int i = 0; i < device_count(DeviceType::CPU); ++i) devices.emplace_back(DeviceType::CPU, i);
  for (int i = 0; i < cuda::device_count(); ++i) devices.emplace_back(DeviceType::CUDA, i);
  std::printf("training on %zu device(s):", devices.size());
  for (Device d : devices) std::printf(" %s", d.str().c_str());
  std::printf("%s\n", devices.size() == 1 ? " (STRATA_CPU_DEVICES=2 gives two virtual CPU devices)" : "");

  constexpr int64_t kBatch = 64, kSteps = 12;
  const auto [images, labels] = training_data(kBatch * kSteps);
  std::vector<Replica> all = replicas_on(devices);
  std::vector<Replica> one = replicas_on({devices[0]});
  reset_transfer_counters();
  double first_loss = 0, last_loss = 0;
  for (int64_t step = 0; step < kSteps; ++step) {
    const Tensor x = images.narrow(0, step * kBatch, kBatch), y = labels.narrow(0, step * kBatch, kBatch);
    last_loss = train_step(all, x, y);
    if (step == 0) first_loss = last_loss;
    train_step(one, x, y);
  }
  const TransferCounters copies = transfer_counters();
  std::printf("loss %.4f -> %.4f over %lld steps of %lld images\n", first_loss, last_loss,
              static_cast<long long>(kSteps), static_cast<long long>(kBatch));
  std::printf("copies: %lld host->device, %lld device->host, %lld device->device\n",
              static_cast<long long>(copies.host_to_device_copies), static_cast<long long>(copies.device_to_host_copies),
              static_cast<long long>(copies.device_to_device_copies));

  // Every replica holds the weights that one device reaches on the same global batches, up to float rounding
  // (the gradients are summed in another order).
  double worst = 0;
  const auto reference = one[0].net->parameters();
  for (const Replica& replica : all) {
    const auto params = replica.net->parameters();
    for (std::size_t p = 0; p < params.size(); ++p) {
      const auto got = params[p].to_vector<float>(), want = reference[p].to_vector<float>();
      for (std::size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::abs(double{got[i]} - want[i]) / (1e-3 + std::abs(double{want[i]})));
      }
    }
  }
  std::printf("largest relative difference from one-device training: %.2e\n", worst);
  if (!(worst < 1e-3) || !(last_loss < first_loss)) {
    std::fprintf(stderr, "multi_device_sgd: %s\n",
                 worst < 1e-3 ? "the loss did not fall" : "the replicas diverged from one-device training");
    return 1;
  }
  return 0;
} catch (const strata::Error& e) {
  std::fprintf(stderr, "multi_device_sgd: %s\n", e.what());
  return 1;
}
