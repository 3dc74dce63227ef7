#include "strata/data/dataloader.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include "strata/core/error.h"
#include "strata/data/sampling.h"
#include "strata/runtime/registry.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::data {

// Note [Overlapping copies]
// With prefetch, a background thread prepares the next batches in host memory (pinned when pin_memory is set)
// while the consumer works, so in the steady state a batch is ready when asked for. The consumer's thread then
// copies it with to(device, non_blocking): from pinned memory that only enqueues the copy on the consumer's current
// stream, ahead of the work that will use it, and returns. The loader drops the host batch at once: the copy has
// recorded its stream on the pinned buffers, so the pinned allocator does not hand them to a later batch before the
// copy has run (Note [Memory used on other streams] in allocator.h).

namespace {

int64_t dataset_size(const Dataset& dataset) {
  const int64_t n = dataset.size();
  STRATA_CHECK(n >= 0, InvalidArgumentError, "DataLoader: the dataset's size() is {}, which is negative", n);
  return n;
}

// What the background thread hands over: a batch in host memory, or the exception that stopped it.
struct Prepared {
  Example batch;
  std::exception_ptr error;
};

// Note [Where bytes become floats]
// Datasets of images hold u8, as the IDX files do (Fashion-MNIST's training images are 47 MB as bytes, 188 MB as f32).
// A loader hands out what the dataset holds, as PyTorch's default_collate does; with scale_bytes (torchvision's
// ToTensor, which strata-train sets) each u8 batch becomes f32 in [0, 1] when it is made: x * (1.0f / 255.0f), one
// f32 multiplication by the f32 constant, wherever it runs. The loader does it rather than a transform because it can
// do it after the copy to a GPU. Where:
// - On the host, by the loader's thread while it prepares the batch (prefetch keeps that off the training step's
//   critical path). For a CPU device this is the cheapest place: the step's threads stay free, and a CPU "copy" moves
//   nothing across a bus.
// - On the device, for a GPU without a transform: the u8 batch is copied and becomes f32 there, through two queued
//   ops (to(F32), then a multiplication by the same f32 scalar, which the kernel multiplies in f32). A quarter of the
//   bytes cross the bus, the pinned staging buffers are a quarter the size, and the conversion is a few microseconds
//   of GPU time queued on the consumer's stream, so nothing waits for it.
// Both are bit-identical: u8 -> f32 is exact and one IEEE multiplication rounds the same everywhere (no fast-math;
// nothing to contract into an FMA). Transforms take host batches (Note [Batch transforms]), so with a transform
// the conversion is on the host. DataLoaderOptions::convert_on_device forces either side, which is how the tests
// check the device path on a virtual CPU device.
constexpr float kByteScale = 1.0f / 255.0f;

// u8 images become f32 in [0, 1] in a new buffer when `scale`. Other data is kept, or copied when a transform will
// see it (they may work in place, see Note [Batch transforms], and a dataset may hand out its own memory) or it must
// be pinned.
Tensor host_batch(const Tensor& data, bool scale, bool pinned, bool must_own) {
  if (!scale || data.dtype() != DType::U8) {
    if (!must_own && (!pinned || data.is_pinned())) return data.contiguous();
    Tensor copy = empty(data.shape(), TensorOptions(data.dtype()).pinned(pinned));
    copy.copy_(data);
    return copy;
  }
  const Tensor src = data.contiguous();
  Tensor out = empty(src.shape(), TensorOptions(DType::F32).pinned(pinned));
  const auto* in = src.data<uint8_t>();
  float* o = out.data<float>();
  const int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(in[i]) * kByteScale;
  return out;
}

// The same conversion with ops on the batch's device (Note [Where bytes become floats]).
Tensor to_float_on_device(const Tensor& bytes) { return bytes.to(DType::F32) * Scalar(kByteScale); }

}  // namespace

// What a loader's iterations share. The settings are read-only after construction; the rest takes a mutex.
struct DataLoader::State {
  std::shared_ptr<const Dataset> dataset;
  DataLoaderOptions options;
  bool convert_on_device = false;  // options.convert_on_device, resolved
  // Note [Batch transforms]: a transform is called on one batch at a time, even with iterations on several threads.
  std::mutex transform_mutex;
  mutable std::mutex mutex;  // the fields below
  uint64_t epoch = 0;
  int64_t first_batch = 0;
  DataLoaderStats stats;
};

namespace {

// The background thread of an iteration that prefetches, and what it hands over, under `mutex`.
struct Prefetch {
  std::mutex mutex;
  std::condition_variable not_full;
  std::condition_variable not_empty;
  std::deque<Prepared> ready;
  bool stop = false;
  std::thread thread;
  // The process that started the thread: a forked child has the thread's bookkeeping but not the thread.
  pid_t pid = getpid();
};

}  // namespace

// One iteration: its order and position, and its background thread when prefetching.
struct DataLoader::Epoch {
  std::shared_ptr<State> state;
  std::vector<int64_t> order;
  int64_t num_batches = 0;
  int64_t consumed = 0;
  std::unique_ptr<Prefetch> prefetch;

  ~Epoch() {
    if (prefetch == nullptr) return;
    if (getpid() != prefetch->pid) {
      // In a forked child the thread is gone, and it may have held the mutex or waited on a condition variable,
      // whose destruction would then wait forever: all of it is left as it is.
      static_cast<void>(prefetch.release());
      return;
    }
    {
      std::lock_guard lock(prefetch->mutex);
      prefetch->stop = true;
    }
    prefetch->not_full.notify_all();
    prefetch->thread.join();
  }

  bool next(Batch& out);
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.dataset = std::move(dataset);
  s.options = std::move(options);
  STRATA_CHECK(s.dataset != nullptr, InvalidArgumentError, "DataLoader: the dataset is null");
  STRATA_CHECK(s.options.batch_size > 0, InvalidArgumentError, "DataLoader: batch_size must be positive, got {}",
               s.options.batch_size);
  STRATA_CHECK(s.options.prefetch >= 0, InvalidArgumentError, "DataLoader: prefetch must be non-negative, got {}",
               s.options.prefetch);
  s.options.device = resolve(s.options.device);
  check_device(s.options.device);
  STRATA_CHECK(!(s.options.convert_on_device.value_or(false) && s.options.transform), InvalidArgumentError,
               "DataLoader: convert_on_device cannot be set with a transform, which takes host batches");
  s.convert_on_device = s.options.scale_bytes &&
                        s.options.convert_on_device.value_or(!s.options.device.is_cpu() && !s.options.transform);
}

DataLoader::~DataLoader() = default;

namespace {

int64_t batches_in(const Dataset& dataset, const DataLoaderOptions& options) {
  const int64_t n = dataset_size(dataset);
  const int64_t b = options.batch_size;
  return n / b + (options.drop_last || n % b == 0 ? 0 : 1);
}

}  // namespace

int64_t DataLoader::size() const { return batches_in(*state_->dataset, state_->options); }

void DataLoader::set_epoch(uint64_t epoch) {
  std::lock_guard lock(state_->mutex);
  state_->epoch = epoch;
}

uint64_t DataLoader::epoch() const {
  std::lock_guard lock(state_->mutex);
  return state_->epoch;
}

void DataLoader::set_first_batch(int64_t batch) {
  const int64_t batches = size();
  STRATA_CHECK(batch >= 0 && batch <= batches, InvalidArgumentError,
               "DataLoader: set_first_batch({}) is outside an epoch of {} batches", batch, batches);
  std::lock_guard lock(state_->mutex);
  state_->first_batch = batch;
}

const DataLoaderOptions& DataLoader::options() const { return state_->options; }

DataLoaderStats DataLoader::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

namespace {

// Prepares batch `k` of an epoch in host memory. Runs on the background thread when prefetching.
// u8 data stays u8 when converted on the device (Note [Where bytes become floats]).
Example prepare(const Dataset& dataset, const DataLoaderOptions& options, bool convert_on_device,
                std::mutex& transform_mutex, const std::vector<int64_t>& order, int64_t k) {
  const int64_t begin = k * options.batch_size;
  const int64_t count = std::min<int64_t>(options.batch_size, static_cast<int64_t>(order.size()) - begin);
  Tensor indices = empty({count}, DType::I64);
  std::memcpy(indices.data_ptr(), order.data() + begin, static_cast<std::size_t>(count) * sizeof(int64_t));
  Example batch = dataset.get_batch(indices);
  for (const Tensor* t : {&batch.data, &batch.target}) {
    const char* what = t == &batch.data ? "data" : "target";
    STRATA_CHECK(t->defined() && t->dim() >= 1 && t->size(0) == count, ShapeError,
                 "DataLoader: the dataset's get_batch returned {} of shape {} for {} indices", what,
                 t->defined() ? shape_str(t->shape()) : "undefined", count);
    STRATA_CHECK(t->device().is_cpu(), InvalidArgumentError,
                 "DataLoader: the dataset's get_batch returned {} on {}; the loader prepares batches in host memory, "
                 "so keep the dataset on the CPU and give the loader a device instead",
                 what, t->device());
  }
  batch.data = host_batch(batch.data, options.scale_bytes && !convert_on_device, options.pin_memory,
                          static_cast<bool>(options.transform));
  if (options.transform) {
    {
      std::lock_guard lock(transform_mutex);
      batch.data = options.transform(std::move(batch.data));
    }
    STRATA_CHECK(batch.data.defined() && batch.data.device().is_cpu(), InvalidArgumentError,
                 "DataLoader: the transform must return a defined host tensor");
    STRATA_CHECK(batch.data.dim() >= 1 && batch.data.size(0) == count, ShapeError,
                 "DataLoader: the transform returned data of shape {} for a batch of {}; it must keep the batch "
                 "dimension first and its size",
                 batch.data.shape(), count);
  }
  batch.target = batch.target.contiguous();
  if (options.pin_memory) {
    batch.data = batch.data.pin_memory();
    batch.target = batch.target.pin_memory();
  }
  return batch;
}

}  // namespace

DataLoader::Iterator DataLoader::begin() {
  auto epoch = std::make_shared<Epoch>();
  epoch->state = state_;
  const State& s = *state_;
  const int64_t n = dataset_size(*s.dataset);
  uint64_t number = 0;
  int64_t first = 0;
  {
    std::lock_guard lock(state_->mutex);
    number = state_->epoch++;
    first = std::exchange(state_->first_batch, 0);
  }
  if (s.options.shuffle) {
    epoch->order = permutation(n, s.options.seed, number);
  } else {
    epoch->order.resize(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) epoch->order[static_cast<std::size_t>(i)] = i;
  }
  epoch->num_batches = batches_in(*s.dataset, s.options);
  epoch->consumed = std::min(first, epoch->num_batches);
  if (s.options.prefetch > 0 && epoch->consumed < epoch->num_batches) {
    epoch->prefetch = std::make_unique<Prefetch>();
    // The thread reads the epoch through plain pointers: the epoch joins it before it goes.
    epoch->prefetch->thread = std::thread([e = epoch.get(), p = epoch->prefetch.get(), first = epoch->consumed] {
      State& st = *e->state;
      for (int64_t k = first; k < e->num_batches; ++k) {
        Prepared item;
        try {
          item.batch = prepare(*st.dataset, st.options, st.convert_on_device, st.transform_mutex, e->order, k);
        } catch (...) {
          item.error = std::current_exception();
        }
        std::unique_lock lock(p->mutex);
        p->not_full.wait(lock,
                         [&] { return p->stop || static_cast<int64_t>(p->ready.size()) < st.options.prefetch; });
        if (p->stop) return;
        const bool failed = item.error != nullptr;
        p->ready.push_back(std::move(item));
        lock.unlock();
        p->not_empty.notify_one();
        if (failed) return;
      }
    });
  }
  return Iterator(std::move(epoch));
}

DataLoader::Iterator::Iterator(std::shared_ptr<Epoch> epoch) : epoch_(std::move(epoch)) { advance(); }

void DataLoader::Iterator::advance() {
  if (epoch_ != nullptr && !epoch_->next(batch_)) {
    epoch_.reset();
    batch_ = {};
  }
}

bool DataLoader::Epoch::next(Batch& out) {
  if (consumed >= num_batches) return false;
  State& s = *state;
  const DataLoaderOptions& options = s.options;
  STRATA_CHECK(prefetch == nullptr || getpid() == prefetch->pid, InvalidArgumentError,
               "DataLoader: this iteration was started in process {} before a fork; start a new one in this process",
               prefetch->pid);

  Example host;
  double waited = 0.0;
  const auto start = std::chrono::steady_clock::now();
  if (prefetch != nullptr) {
    Prefetch& p = *prefetch;
    Prepared item;
    {
      std::unique_lock lock(p.mutex);
      if (p.ready.empty()) {
        p.not_empty.wait(lock, [&] { return !p.ready.empty(); });
        waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      item = std::move(p.ready.front());
      p.ready.pop_front();
    }
    p.not_full.notify_one();
    if (item.error) {
      consumed = num_batches;  // the thread has stopped; the iteration ends here
      std::rethrow_exception(item.error);
    }
    host = std::move(item.batch);
  } else {
    // Without prefetch the consumer waits for every batch while it is prepared.
    try {
      host = prepare(*s.dataset, options, s.convert_on_device, s.transform_mutex, order, consumed);
    } catch (...) {
      consumed = num_batches;
      throw;
    }
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  ++consumed;
  {
    std::lock_guard lock(s.mutex);
    ++s.stats.batches;
    s.stats.wait_seconds += waited;
  }

  // The host batch may go as soon as its copies are queued (see Note [Overlapping copies]).
  out.data = host.data.to(options.device, options.non_blocking);
  if (out.data.dtype() == DType::U8 && s.convert_on_device) out.data = to_float_on_device(out.data);
  out.target = host.target.to(options.device, options.non_blocking);
  return true;
}

}  // namespace strata::data
