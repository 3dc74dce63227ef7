#include "trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <set>

#include "job_checkpoint.h"
#include "stop_agreement.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/data/dataloader.h"
#include "strata/data/distributed_sampler.h"
#include "strata/data/transforms.h"
#include "strata/io/file.h"
#include "strata/io/safetensors.h"
#include "strata/nn/functional.h"
#include "strata/nn/layers.h"
#include "strata/optim/adam.h"
#include "strata/optim/lr_scheduler.h"
#include "strata/optim/sgd.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/profiler.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"

namespace strata::train {

namespace F = nn::functional;

namespace {

// Evaluation's batch: its activations, never kept for a backward pass, still peak at two of the first layer's at once
// (convolution and ReLU outputs, 100 KB per image each): at 1000 images that was 200 MB, two thirds of strata-train's
// peak resident memory. At 100 they are 20 MB, under a training step's allocations. Logits are computed image by
// image whatever the batch, and strata-train's test accuracies did not move (docs/benchmarks.md).
constexpr int64_t kEvalBatch = 100;
constexpr std::string_view kCheckpointFormat = "strata-train checkpoint 2";
constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimizerPrefix = "optimizer.";
constexpr const char* kSchedulerPrefix = "scheduler.";
constexpr const char* kProgressPrefix = "progress.";

const char* recipe_name(Recipe r) { return r == Recipe::Reference ? "reference" : "fast"; }

// The seed of one batch's augmentation: a run resumed at any step draws the same flips as an uninterrupted one.
uint64_t batch_seed(uint64_t seed, int64_t epoch, int64_t batch) {
  return mix_seed(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(batch));
}

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
  net->fuse();  // Note [Fusing a Sequential's layers]: the same values, fewer passes over the largest tensors
  net->to(device);
  return net;
}

// Note [The FLOP floor]
// strata-bench sets each epoch beside its floor: the time the epoch's arithmetic would take at the machine's peak f32
// FMA rate on all threads. The arithmetic counted is the multiply-adds of the convolutions and linear layers, which
// are all but a sliver of the work: per layer and example, its output elements times the multiply-adds behind each
// (the weight's elements per output channel, Cin/groups x kh x kw or in_features), twice as FLOPs, for the forward
// pass, the weight gradient and, except for the first layer with parameters (whose input needs no gradient, so
// autograd computes none), the input gradient. Biases, activations, pooling, the loss and the optimizer are O(outputs
// or parameters), not O(multiply-adds), about 1 % of the reference network's 25 MFLOP per image, and are left out:
// the floor is that much low, so the ratio to it is, if anything, high.
// Shapes come from one forward pass of a zero example rather than from the layers' options, so that padding, stride,
// dilation and groups are the layers' own.
namespace {

// Adds the FLOPs of `layers` for input `x` to `flops`, and returns their output. `input_needs_grad` carries whether
// some earlier layer has parameters.
Tensor count_flops(nn::Sequential& layers, Tensor x, bool& input_needs_grad, int64_t& flops) {
  for (const std::shared_ptr<nn::Layer>& layer : layers) {
    if (auto* inner = dynamic_cast<nn::Sequential*>(layer.get())) {
      x = count_flops(*inner, std::move(x), input_needs_grad, flops);
      continue;
    }
    Tensor y = (*layer)(x);
    const Tensor* weight = nullptr;
    if (auto* conv = dynamic_cast<nn::Conv2d*>(layer.get())) weight = &conv->weight;
    if (auto* linear = dynamic_cast<nn::Linear*>(layer.get())) weight = &linear->weight;
    if (weight != nullptr) {
      // Multiply-adds per output element: the weight's elements per output channel (its first dimension).
      const int64_t macs = y.numel() * (weight->numel() / weight->size(0));
      flops += 2 * macs * (input_needs_grad ? 3 : 2);
    }
    if (!layer->parameters().empty()) input_needs_grad = true;
    x = std::move(y);
  }
  return x;
}

}  // namespace

int64_t training_flops_per_example(nn::Sequential& model, const Shape& example) {
  NoGradGuard no_grad;
  const std::vector<Tensor> params = model.parameters();
  const Device device = params.empty() ? kCPU : params.front().device();
  Shape shape{1};
  for (const int64_t d : example) shape.push_back(d);
  int64_t flops = 0;
  bool input_needs_grad = false;
  (void)count_flops(model, zeros(shape, TensorOptions(DType::F32).device(device)), input_needs_grad, flops);
  return flops;
}

class Network {
 public:
  Network(const TrainOptions& options, int64_t steps_per_epoch) {
    // The layers draw their weights on the CPU and then move (reference_network), so the CPU's generator is seeded
    // too: on any other device (a GPU, cpu:1) the weights would otherwise depend on what ran before in the process.
    default_generator(kCPU).manual_seed(options.seed);
    default_generator(options.device).manual_seed(options.seed);
    model = reference_network(options.device);
    optimizer_lr = options.lr.value_or(options.recipe == Recipe::Reference ? 0.01 : 2e-3);
    if (options.recipe == Recipe::Reference) {
      optimizer = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions(optimizer_lr).momentum(0.9));
    } else {
      optimizer = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions(optimizer_lr));
      // Stepped once per training step: the rate falls along a half cosine over the whole run.
      scheduler = std::make_unique<optim::CosineAnnealingLR>(*optimizer, options.epochs * steps_per_epoch);
    }
  }

  std::shared_ptr<nn::Sequential> model;
  double optimizer_lr;  // the run's learning rate, before any schedule
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
  // Note [Training on several ranks]: each rank's shard has DistributedSampler::size() images.
  const int64_t images = data::DistributedSampler(train_set_->size(), world_size(), rank()).size();
  const int64_t steps = images / options_.batch_size + (images % options_.batch_size != 0 ? 1 : 0);
  int64_t total_steps = 0;
  STRATA_CHECK(!__builtin_mul_overflow(options_.epochs, steps, &total_steps), InvalidArgumentError,
               "strata-train: --epochs {} of {} steps each are more steps than a 64-bit count holds", options_.epochs,
               steps);
  steps_per_epoch_ = steps;
  if (options_.checkpoint && rank() == 0) lock_ = claim_checkpoint(*options_.checkpoint, options_.resume);
  network_ = std::make_unique<Network>(options_, steps);
  if (options_.resume && checkpoint_exists(*options_.checkpoint)) load_checkpoint();
  if (rank() != 0 && steps_done_ > 0) {
    // The checkpoint's sums so far are the world's (reduce_epoch_sums before saving): rank 0 carries them on.
    loss_sum_.fill_(0);
    correct_.fill_(0);
    images_done_ = 0;
  }
  if (world_size() > 1) ddp_ = std::make_unique<dist::DistributedDataParallel>(network_->model, *options_.group);
}

// Note [Training on several ranks]
// Under mpirun every rank builds the same network from the same seed, and DistributedDataParallel makes sure of it
// by broadcasting rank 0's. Each epoch, every rank draws the same seeded order of the whole training set and takes
// its shard (DistributedSampler: padded to a multiple of the world size), in steps of `batch_size` images: the
// batch size is per rank, as in PyTorch, so a step of the world sees size x batch_size images and the learning rate
// is not rescaled. The ranks agree on whether to stop (a small all-reduce that runs behind the next step, Note
// [Agreeing to stop without waiting]), so that a signal that reaches one rank stops all of them at the same step. The
// epoch's loss and accuracy sums are all-reduced once, after the epoch; the test set is evaluated whole on every rank.
// Rank 0 alone takes the checkpoint's lock and writes it; every rank reads it on resume (on several machines the path
// must be on a shared filesystem), and a checkpoint written by another number of ranks is refused, as its shards and
// steps differ.
std::shared_ptr<const data::Dataset> Trainer::shard(int64_t epoch) const {
  if (world_size() == 1) return train_set_;
  data::DistributedSampler sampler(train_set_->size(), world_size(), rank(), /*shuffle=*/true, options_.seed);
  sampler.set_epoch(static_cast<uint64_t>(epoch));
  return std::make_shared<data::Subset>(train_set_, sampler.indices());
}

void Trainer::reduce_epoch_sums() {
  if (world_size() == 1) return;
  Tensor images = tensor<int64_t>({images_done_});
  options_.group->all_reduce(loss_sum_)->wait();
  options_.group->all_reduce(correct_)->wait();
  options_.group->all_reduce(images)->wait();
  images_done_ = images.item<int64_t>();
}

Trainer::~Trainer() = default;

namespace {

data::DataLoaderOptions loader_options(const TrainOptions& o, int64_t batch_size) {
  data::DataLoaderOptions l;
  l.batch_size = batch_size;
  l.prefetch = 2;
  l.device = o.device;
  // Pinned batches where the device's backend copies from pinned memory asynchronously (a GPU's), never on the CPU.
  const Backend* device_backend = find_backend(o.device.type());
  l.pin_memory = !o.device.is_cpu() && device_backend != nullptr && device_backend->supports_pinned_memory();
  l.seed = o.seed;
  l.scale_bytes = true;  // the network takes images in [0, 1]
  return l;
}

// [N, 28, 28] images as the network's [N, 1, 28, 28].
Tensor as_images(const Tensor& data) { return data.dim() == 3 ? data.unsqueeze(1) : data; }

}  // namespace

std::optional<EpochReport> Trainer::train_epoch(const StepCallback& on_step, bool may_stop) {
  const Device device = options_.device;
  const int64_t epoch = epochs_done_;  // 0-based index of this epoch
  const int64_t first_step = steps_done_;
  data::DataLoaderOptions lo = loader_options(options_, options_.batch_size);
  lo.shuffle = world_size() == 1;  // with several ranks the shard is already in the epoch's order
  if (options_.recipe == Recipe::Fast) {
    // Called on the batches in order (Note [Batch transforms]), so `batch` counts them.
    lo.transform = [seed = options_.seed, epoch, batch = first_step](Tensor images) mutable {
      data::RandomHorizontalFlip flip(0.5, batch_seed(seed, epoch, batch++));
      return flip(std::move(images));
    };
  }
  data::DataLoader loader(shard(epoch), lo);
  loader.set_epoch(static_cast<uint64_t>(epoch));
  loader.set_first_batch(first_step);

  nn::Sequential& model = *network_->model;
  optim::Optimizer& optimizer = *network_->optimizer;
  model.train();
  reset_peak_stats(device);
  const TransferCounters counters_before = transfer_counters();
  std::vector<Tensor> step_losses;  // with record_steps: each step's loss, on the device
  std::vector<double> step_lrs;
  const auto start = std::chrono::steady_clock::now();

  // Note [Metrics stay on the device]: the sums are device tensors updated without reading them, so a step never
  // waits for the GPU; they are read once, after the epoch.
  if (first_step == 0) {
    loss_sum_ = zeros({}, TensorOptions(DType::F32).device(device));
    correct_ = zeros({}, TensorOptions(DType::I64).device(device));
    images_done_ = 0;
  }
  const int64_t images_before = images_done_;
  const int64_t steps = loader.size();
  for (const data::Batch& batch : loader) {
    // Each step is a range on the profile (--profile), named by its step of the run.
    const profiler::RecordFunction range(fmt::format("step {}", epoch * steps + steps_done_ + 1));
    const Tensor logits = model(as_images(batch.data));
    const Tensor loss = F::cross_entropy(logits, batch.target);
    optimizer.zero_grad();
    loss.backward();
    if (options_.record_steps) {
      step_losses.push_back(loss.detach());
      step_lrs.push_back(optimizer.lr());  // the rate this step uses, before the schedule moves it
    }
    optimizer.step();
    if (network_->scheduler) network_->scheduler->step();
    {
      NoGradGuard no_grad;
      const int64_t n = batch.target.size(0);
      add_(loss_sum_, loss.detach(), static_cast<double>(n));
      add_(correct_, sum(eq(argmax(logits.detach(), 1), batch.target).to(DType::I64)));
      images_done_ += n;
    }
    ++steps_done_;
    if (on_step) on_step(steps_done_, steps);
    // Note [Agreeing to stop without waiting]: every rank learns the same answer after the same step.
    if (may_stop && stop_.after_step(stop_requested_.load(std::memory_order_relaxed)) && steps_done_ < steps) {
      reduce_epoch_sums();  // rank 0's checkpoint holds the world's sums so far
      if (options_.checkpoint && rank() == 0) save_checkpoint();
      stopped_ = true;
      return std::nullopt;
    }
  }
  const int64_t trained_here = images_done_ - images_before;
  if (may_stop) stop_.settle();  // the last step's answer, before the epoch's own collectives
  reduce_epoch_sums();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  EpochReport r;
  r.epoch = epoch + 1;
  r.train_loss = loss_sum_.item<double>() / static_cast<double>(images_done_);
  r.train_accuracy = static_cast<double>(correct_.item<int64_t>()) / static_cast<double>(images_done_);
  r.seconds = seconds;
  r.images_per_second = static_cast<double>(trained_here * world_size()) / seconds;
  r.peak_memory_bytes = memory_stats(device).allocated_bytes.peak;
  const TransferCounters counters = transfer_counters();
  r.synchronizations = counters.synchronizations - counters_before.synchronizations;
  r.host_to_device_copies = counters.host_to_device_copies - counters_before.host_to_device_copies;
  r.device_to_host_copies = counters.device_to_host_copies - counters_before.device_to_host_copies;
  r.device_to_device_copies = counters.device_to_device_copies - counters_before.device_to_device_copies;
  r.first_step = first_step;
  if (!step_losses.empty()) {
    const Tensor losses = stack(step_losses).to(kCPU, DType::F64).contiguous();
    r.step_losses.assign(losses.data<double>(), losses.data<double>() + losses.numel());
    r.step_lrs = std::move(step_lrs);
  }
  r.test_accuracy = evaluate(*test_set_);
  ++epochs_done_;
  steps_done_ = 0;
  images_done_ = 0;
  if (options_.checkpoint && rank() == 0) save_checkpoint();
  return r;
}

std::vector<EpochReport> Trainer::run(const StepCallback& on_step,
                                      const std::function<void(const EpochReport&)>& on_epoch) {
  std::vector<EpochReport> reports;
  while (epochs_done_ < options_.epochs) {
    // Between epochs the last checkpoint holds everything. With several ranks only an agreed stop: a rank's own
    // request is agreed on in the next epoch's steps.
    if (stop_.agreed() || (world_size() == 1 && stop_requested_.load(std::memory_order_relaxed))) {
      stopped_ = true;
      break;
    }
    std::optional<EpochReport> report = train_epoch(on_step, true);
    if (!report) break;
    reports.push_back(*report);
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
// counts, learning rate), the schedule's position, the device's random generator and, as metadata, every setting
// that decides the result (Note [Resume checks the settings]) and the position: epochs done and steps done in the
// epoch under way, with that epoch's metric sums so far. Everything else that decides the next step is a function of
// (seed, epoch, step): the loader's shuffle (set_epoch, set_first_batch) and each batch's augmentation draws
// (batch_seed). So a run resumed after any step, at an epoch's end or inside one after a stop request, repeats
// exactly what the uninterrupted run would have done.
//
// Note [Resume checks the settings]
// A resumed run must be the run that was interrupted: another --epochs changes the cosine schedule, another --lr,
// --batch-size, --seed or data subset changes every later step. So the checkpoint records them all, and a resume
// with different ones is refused with the list of differences. --resume-with-changes (accept_changes) continues
// anyway, with this run's settings from the checkpoint's position on: a deliberate change whose result matches no
// uninterrupted run. Two changes stay refused: another recipe (its optimizer state would not fit) and, inside an
// epoch, another batch size or training set (the position inside the epoch would mean other images).
io::Metadata Trainer::settings() const {
  return {{"recipe", recipe_name(options_.recipe)},           {"seed", std::to_string(options_.seed)},
          {"epochs", std::to_string(options_.epochs)},        {"batch_size", std::to_string(options_.batch_size)},
          {"lr", fmt::format("{}", network_->optimizer_lr)},  {"train_images", std::to_string(train_set_->size())},
          {"test_images", std::to_string(test_set_->size())}, {"world_size", std::to_string(world_size())}};
}

void Trainer::save_checkpoint() const {
  io::TensorMap tensors;
  for (const auto& [name, t] : network_->model->state_dict()) tensors[kModelPrefix + name] = t;
  for (const auto& [name, t] : network_->optimizer->state_dict()) tensors[kOptimizerPrefix + name] = t;
  if (network_->scheduler) {
    for (const auto& [name, t] : network_->scheduler->state_dict()) tensors[kSchedulerPrefix + name] = t;
  }
  if (steps_done_ > 0) {
    tensors[std::string(kProgressPrefix) + "loss_sum"] = loss_sum_;
    tensors[std::string(kProgressPrefix) + "correct"] = correct_;
  }
  const GeneratorState rng = default_generator(options_.device).state();
  io::Metadata meta = settings();
  meta.insert({{"format", std::string(kCheckpointFormat)},
               {"epochs_done", std::to_string(epochs_done_)},
               {"steps_done", std::to_string(steps_done_)},
               {"images_done", std::to_string(images_done_)},
               {"generator", generator_text(rng)}});
  io::save_safetensors(*options_.checkpoint, tensors, meta);
}

void Trainer::check_settings(const io::Metadata& saved, int64_t steps_done) const {
  const std::set<std::string> changed =
      changed_settings(*options_.checkpoint, saved, settings(), options_.accept_changes, {"recipe"},
                       "the optimizer state would not fit");
  STRATA_CHECK(steps_done == 0 || (!changed.contains("batch_size") && !changed.contains("train_images") &&
                                   !changed.contains("world_size")),
               InvalidArgumentError,
               "{}: the checkpoint stopped inside an epoch, after step {}, which another batch size, training set or "
               "number of ranks cannot continue; resume with batch_size {}, train_images {} and {} rank(s)",
               options_.checkpoint->string(), steps_done, saved.at("batch_size"), saved.at("train_images"),
               saved.at("world_size"));
}

void Trainer::load_checkpoint() {
  const std::filesystem::path& path = *options_.checkpoint;
  io::SafetensorsContent content = io::load_safetensors(path, options_.device);
  auto meta = [&](const char* key) { return metadata_value(path, content.metadata, key); };
  const std::string format = meta("format");
  STRATA_CHECK(format == kCheckpointFormat, IOError, "{}: its format is \"{}\"; this strata-train reads \"{}\"",
               path.string(), format, kCheckpointFormat);
  const int64_t done = parse_count(path, "epochs_done", meta("epochs_done"));
  const int64_t steps_done = parse_count(path, "steps_done", meta("steps_done"));
  const int64_t images_done = parse_count(path, "images_done", meta("images_done"));
  check_settings(content.metadata, steps_done);
  STRATA_CHECK(steps_done < steps_per_epoch_, IOError, "{}: steps_done is {}, but an epoch has only {} steps",
               path.string(), steps_done, steps_per_epoch_);
  const GeneratorState rng = parse_generator(path, meta("generator"));
  nn::StateDict model_state, optimizer_state, scheduler_state, progress;
  for (auto& [name, t] : content.tensors) {
    const auto take = [&](const char* prefix, nn::StateDict& into) {
      if (!name.starts_with(prefix)) return false;
      into.insert(name.substr(std::string_view(prefix).size()), t);
      return true;
    };
    STRATA_CHECK(take(kModelPrefix, model_state) || take(kOptimizerPrefix, optimizer_state) ||
                     take(kSchedulerPrefix, scheduler_state) || take(kProgressPrefix, progress),
                 IOError, "{}: unexpected tensor \"{}\" in a strata-train checkpoint", path.string(), name);
  }
  if (steps_done > 0) {
    for (const auto& [key, dtype] : {std::pair{"loss_sum", DType::F32}, std::pair{"correct", DType::I64}}) {
      STRATA_CHECK(progress.contains(key) && progress.at(key).dim() == 0 && progress.at(key).dtype() == dtype, IOError,
                   "{}: the checkpoint stopped inside an epoch but holds no scalar {} tensor \"{}{}\"", path.string(),
                   dtype, kProgressPrefix, key);
    }
    loss_sum_ = progress.at("loss_sum");
    correct_ = progress.at("correct");
  }
  try {
    network_->model->load_state_dict(model_state);
    network_->optimizer->load_state_dict(optimizer_state);
    if (network_->scheduler) network_->scheduler->load_state_dict(scheduler_state);
  } catch (const InvalidArgumentError& e) {
    STRATA_THROW(IOError, "{}: the checkpoint does not fit this network: {}", path.string(), e.what());
  }
  // An accepted change of learning rate (Note [Resume checks the settings]) applies from here on.
  if (meta("lr") != settings().at("lr")) {
    if (network_->scheduler) {
      nn::StateDict rebased;
      rebased.insert("last_epoch", scheduler_state.at("last_epoch"));
      rebased.insert("base_lr", scalar_tensor(network_->optimizer_lr, DType::F64));
      network_->scheduler->load_state_dict(rebased);
    } else {
      network_->optimizer->set_lr(network_->optimizer_lr);
    }
  }
  default_generator(options_.device).set_state(rng);
  epochs_done_ = done;
  steps_done_ = steps_done;
  images_done_ = images_done;
}

}  // namespace strata::train
