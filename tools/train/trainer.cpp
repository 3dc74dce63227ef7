#include "trainer.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cmath>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/data/dataloader.h"
#include "strata/data/transforms.h"
#include "strata/io/file.h"
#include "strata/io/safetensors.h"
#include "strata/nn/functional.h"
#include "strata/nn/layers.h"
#include "strata/optim/adam.h"
#include "strata/optim/lr_scheduler.h"
#include "strata/optim/sgd.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"

namespace strata::train {

namespace F = nn::functional;

namespace {

constexpr int64_t kEvalBatch = 1000;
constexpr std::string_view kCheckpointFormat = "strata-train checkpoint 1";
constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimizerPrefix = "optimizer.";
constexpr const char* kSchedulerPrefix = "scheduler.";

const char* recipe_name(Recipe r) { return r == Recipe::Reference ? "reference" : "fast"; }

// The seed of an epoch's augmentation: runs resumed at epoch k draw the same flips as uninterrupted ones.
uint64_t epoch_seed(uint64_t seed, int64_t epoch) { return seed * 1000003ull + static_cast<uint64_t>(epoch); }

}  // namespace

std::shared_ptr<nn::Sequential> reference_network(Device device) {
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
  net->to(device);
  return net;
}

class Network {
 public:
  Network(const TrainOptions& options, int64_t steps_per_epoch) {
    // The layers draw their weights on the CPU and then move (reference_network), so the CPU's generator is seeded
    // too: on any other device (a GPU, cpu:1) the weights would otherwise depend on what ran before in the process.
    default_generator(kCPU).manual_seed(options.seed);
    default_generator(options.device).manual_seed(options.seed);
    model = reference_network(options.device);
    if (options.recipe == Recipe::Reference) {
      optimizer =
          std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions(options.lr.value_or(0.01)).momentum(0.9));
    } else {
      optimizer = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions(options.lr.value_or(2e-3)));
      // Stepped once per training step: the rate falls along a half cosine over the whole run.
      scheduler = std::make_unique<optim::CosineAnnealingLR>(*optimizer, options.epochs * steps_per_epoch);
    }
  }

  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::CosineAnnealingLR> scheduler;
};

Trainer::Trainer(TrainOptions options, std::shared_ptr<const data::Dataset> train_set,
                 std::shared_ptr<const data::Dataset> test_set)
    : options_(std::move(options)), train_set_(std::move(train_set)), test_set_(std::move(test_set)) {
  STRATA_CHECK(train_set_ != nullptr && test_set_ != nullptr, InvalidArgumentError, "strata-train: a dataset is null");
  STRATA_CHECK(options_.epochs > 0, InvalidArgumentError, "strata-train: --epochs must be positive, got {}",
               options_.epochs);
  STRATA_CHECK(options_.batch_size > 0, InvalidArgumentError, "strata-train: --batch-size must be positive, got {}",
               options_.batch_size);
  STRATA_CHECK(!options_.lr || (std::isfinite(*options_.lr) && *options_.lr > 0), InvalidArgumentError,
               "strata-train: --lr must be a positive number, got {}", options_.lr.value_or(0));
  STRATA_CHECK(train_set_->size() > 0, InvalidArgumentError, "strata-train: the training set is empty");
  // An empty test set would report a test accuracy of 0 % as if measured.
  STRATA_CHECK(test_set_->size() > 0, InvalidArgumentError, "strata-train: the test set is empty");
  STRATA_CHECK(!options_.resume || options_.checkpoint, InvalidArgumentError,
               "strata-train: --resume needs --checkpoint FILE");
  const int64_t images = train_set_->size();
  const int64_t steps = images / options_.batch_size + (images % options_.batch_size != 0 ? 1 : 0);
  int64_t total_steps = 0;
  STRATA_CHECK(!__builtin_mul_overflow(options_.epochs, steps, &total_steps), InvalidArgumentError,
               "strata-train: --epochs {} of {} steps each are more steps than a 64-bit count holds", options_.epochs,
               steps);
  if (options_.checkpoint) check_checkpoint_path();
  network_ = std::make_unique<Network>(options_, steps);
  if (options_.resume && checkpoint_exists()) load_checkpoint();
}

// Note [The checkpoint path is checked before training]
// A checkpoint is written after each epoch; a path that cannot be written would otherwise be found out only then,
// with the epoch's work lost. So the path is tried at start-up: a temporary file is created beside it and removed
// again, as each save does. And an existing file is replaced only when the run resumes from it: one that is not a
// checkpoint of this run (any other file, or another run's checkpoint) is refused rather than overwritten.
void Trainer::check_checkpoint_path() const {
  const std::filesystem::path& path = *options_.checkpoint;
  STRATA_CHECK(!path.empty(), InvalidArgumentError, "strata-train: --checkpoint needs a file name");
  std::error_code ec;
  const bool is_dir = std::filesystem::is_directory(path, ec);
  STRATA_CHECK(!is_dir, IOError, "strata-train: --checkpoint '{}' is a directory; name a file", path.string());
  STRATA_CHECK(options_.resume || !checkpoint_exists(), IOError,
               "strata-train: --checkpoint '{}' exists; pass --resume to continue from it, or remove it or name "
               "another file to start afresh",
               path.string());
  (void)io::AtomicFile(path, "strata-train --checkpoint");
}

bool Trainer::checkpoint_exists() const {
  std::error_code ec;
  const bool exists = std::filesystem::exists(*options_.checkpoint, ec);
  STRATA_CHECK(!ec, IOError, "strata-train: cannot look up --checkpoint '{}': {}", options_.checkpoint->string(),
               ec.message());
  return exists;
}

Trainer::~Trainer() = default;

namespace {

data::DataLoaderOptions loader_options(const TrainOptions& o, int64_t batch_size) {
  data::DataLoaderOptions l;
  l.batch_size = batch_size;
  l.prefetch = 2;
  l.device = o.device;
  l.pin_memory = o.device.is_cuda();
  l.seed = o.seed;
  return l;
}

// [N, 28, 28] images as the network's [N, 1, 28, 28].
Tensor as_images(const Tensor& data) { return data.dim() == 3 ? data.unsqueeze(1) : data; }

}  // namespace

EpochReport Trainer::run_epoch(const StepCallback& on_step) {
  const Device device = options_.device;
  const int64_t epoch = epochs_done_;  // 0-based index of this epoch
  data::DataLoaderOptions lo = loader_options(options_, options_.batch_size);
  lo.shuffle = true;
  if (options_.recipe == Recipe::Fast) {
    auto flip = std::make_shared<data::RandomHorizontalFlip>(0.5, epoch_seed(options_.seed, epoch));
    lo.transform = [flip](Tensor batch) { return (*flip)(std::move(batch)); };
  }
  data::DataLoader loader(train_set_, lo);
  loader.set_epoch(static_cast<uint64_t>(epoch));

  nn::Sequential& model = *network_->model;
  optim::Optimizer& optimizer = *network_->optimizer;
  model.train();
  reset_peak_stats(device);
  const int64_t syncs_before = transfer_counters().synchronizations;
  const auto start = std::chrono::steady_clock::now();

  // Note [Metrics stay on the device]: the sums are device tensors updated without reading them, so a step never
  // waits for the GPU; they are read once, after the epoch.
  Tensor loss_sum = zeros({}, TensorOptions(DType::F32).device(device));
  Tensor correct = zeros({}, TensorOptions(DType::I64).device(device));
  int64_t seen = 0;
  const int64_t steps = loader.size();
  int64_t step = 0;
  for (const data::Batch& batch : loader) {
    const Tensor logits = model(as_images(batch.data));
    const Tensor loss = F::cross_entropy(logits, batch.target);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    if (network_->scheduler) network_->scheduler->step();
    {
      NoGradGuard no_grad;
      const int64_t n = batch.target.size(0);
      add_(loss_sum, loss.detach(), static_cast<double>(n));
      add_(correct, sum(eq(argmax(logits.detach(), 1), batch.target).to(DType::I64)));
      seen += n;
    }
    if (on_step) on_step(++step, steps);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  EpochReport r;
  r.epoch = epoch + 1;
  r.train_loss = loss_sum.item<double>() / static_cast<double>(seen);
  r.train_accuracy = static_cast<double>(correct.item<int64_t>()) / static_cast<double>(seen);
  r.seconds = seconds;
  r.images_per_second = static_cast<double>(seen) / seconds;
  r.peak_memory_bytes = memory_stats(device).allocated_bytes.peak;
  r.synchronizations = transfer_counters().synchronizations - syncs_before;
  r.test_accuracy = evaluate(*test_set_);
  ++epochs_done_;
  if (options_.checkpoint) save_checkpoint();
  return r;
}

std::vector<EpochReport> Trainer::run(const StepCallback& on_step,
                                      const std::function<void(const EpochReport&)>& on_epoch) {
  std::vector<EpochReport> reports;
  while (epochs_done_ < options_.epochs) {
    reports.push_back(run_epoch(on_step));
    if (on_epoch) on_epoch(reports.back());
  }
  return reports;
}

double Trainer::evaluate(const data::Dataset& set) {
  if (set.size() == 0) return 0;
  NoGradGuard no_grad;
  nn::Sequential& model = *network_->model;
  model.eval();
  // The loader wants shared ownership; the set outlives this call.
  data::DataLoader loader(std::shared_ptr<const data::Dataset>(&set, [](const data::Dataset*) {}),
                          loader_options(options_, kEvalBatch));
  Tensor correct = zeros({}, TensorOptions(DType::I64).device(options_.device));
  for (const data::Batch& batch : loader) {
    add_(correct, sum(eq(argmax(model(as_images(batch.data)), 1), batch.target).to(DType::I64)));
  }
  model.train();
  return static_cast<double>(correct.item<int64_t>()) / static_cast<double>(set.size());
}

std::vector<std::pair<std::string, Tensor>> Trainer::model_state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : network_->model->state_dict()) out.emplace_back(name, t);
  return out;
}

// Note [Checkpoints resume exactly]
// A checkpoint holds the model's parameters and buffers, the optimizer's state (momentum, Adam moments, step
// counts, learning rate) and, as metadata, the recipe, seed, batch size and epochs done. Everything else that
// decides the next epoch is a function of (seed, epoch): the loader's shuffle and the augmentation's draws. So a
// resumed run repeats exactly what the uninterrupted run would have done.
void Trainer::save_checkpoint() const {
  io::TensorMap tensors;
  for (const auto& [name, t] : network_->model->state_dict()) tensors[kModelPrefix + name] = t;
  for (const auto& [name, t] : network_->optimizer->state_dict()) tensors[kOptimizerPrefix + name] = t;
  if (network_->scheduler) {
    for (const auto& [name, t] : network_->scheduler->state_dict()) tensors[kSchedulerPrefix + name] = t;
  }
  io::Metadata meta{{"format", std::string(kCheckpointFormat)},
                    {"recipe", recipe_name(options_.recipe)},
                    {"seed", std::to_string(options_.seed)},
                    {"batch_size", std::to_string(options_.batch_size)},
                    {"epochs_done", std::to_string(epochs_done_)}};
  io::save_safetensors(*options_.checkpoint, tensors, meta);
}

void Trainer::load_checkpoint() {
  const std::filesystem::path& path = *options_.checkpoint;
  io::SafetensorsContent content = io::load_safetensors(path, options_.device);
  auto meta = [&](const char* key) {
    auto it = content.metadata.find(key);
    STRATA_CHECK(it != content.metadata.end(), IOError, "{}: not a strata-train checkpoint (no \"{}\" in its metadata)",
                 path.string(), key);
    return it->second;
  };
  const auto expect = [&](const char* key, const std::string& ours) {
    const std::string theirs = meta(key);
    STRATA_CHECK(theirs == ours, InvalidArgumentError,
                 "{}: the checkpoint was written with {} {} but this run has {} {}; resume with the same settings",
                 path.string(), key, theirs, key, ours);
  };
  const std::string format = meta("format");
  STRATA_CHECK(format == kCheckpointFormat, IOError, "{}: its format is \"{}\"; this strata-train reads \"{}\"",
               path.string(), format, kCheckpointFormat);
  expect("recipe", recipe_name(options_.recipe));
  expect("seed", std::to_string(options_.seed));
  expect("batch_size", std::to_string(options_.batch_size));
  const std::string done_text = meta("epochs_done");
  int64_t done = -1;
  const auto [end, ec] = std::from_chars(done_text.data(), done_text.data() + done_text.size(), done);
  STRATA_CHECK(ec == std::errc() && end == done_text.data() + done_text.size() && done >= 0, IOError,
               "{}: epochs_done is \"{}\", not a count of epochs", path.string(), done_text);
  nn::StateDict model_state, optimizer_state, scheduler_state;
  for (auto& [name, t] : content.tensors) {
    const auto take = [&](const char* prefix, nn::StateDict& into) {
      if (!name.starts_with(prefix)) return false;
      into.insert(name.substr(std::string_view(prefix).size()), t);
      return true;
    };
    STRATA_CHECK(take(kModelPrefix, model_state) || take(kOptimizerPrefix, optimizer_state) ||
                     take(kSchedulerPrefix, scheduler_state),
                 IOError, "{}: unexpected tensor \"{}\" in a strata-train checkpoint", path.string(), name);
  }
  try {
    network_->model->load_state_dict(model_state);
    network_->optimizer->load_state_dict(optimizer_state);
    if (network_->scheduler) network_->scheduler->load_state_dict(scheduler_state);
  } catch (const InvalidArgumentError& e) {
    STRATA_THROW(IOError, "{}: the checkpoint does not fit this network: {}", path.string(), e.what());
  }
  epochs_done_ = done;
}

}  // namespace strata::train
