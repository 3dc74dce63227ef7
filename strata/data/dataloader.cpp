#include "strata/data/dataloader.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

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
// Datasets of images hold u8, as the IDX files do (Fashion-MNIST's training images are 47 MB as bytes, 188 MB as f32),
// and each batch becomes f32 in [0, 1] when it is made: x * (1.0f / 255.0f), one f32 multiplication by the f32
// constant, wherever it runs. Where:
// - On the host, by the loader's thread while it prepares the batch (prefetch keeps that off the training step's
//   critical path). For a CPU device this is the cheapest place: the step's threads stay free, and a CPU "copy" moves
//   nothing across a bus.
// - On the device, for a GPU without a transform: the u8 batch is copied and becomes f32 there, through two queued
//   ops (to(F32), then a multiplication by the same f32 scalar, which the kernel multiplies in f32). A quarter of the
//   bytes cross the bus, the pinned staging buffers are a quarter the size, and the conversion is a few microseconds
//   of GPU time queued on the consumer's stream, so nothing waits for it.
// Both are bit-identical: u8 -> f32 is exact and one IEEE multiplication rounds the same everywhere (no fast-math;
// nothing to contract into an FMA). Transforms take f32 host batches (Note [Batch transforms]), so with a transform
// the conversion is on the host. DataLoaderOptions::convert_on_device forces either side, which is how the tests
// check the device path on a virtual CPU device.
constexpr float kByteScale = 1.0f / 255.0f;

// u8 images become f32 in [0, 1] in a new buffer. Other data is kept, or copied when a transform will see it (they
// may work in place, see Note [Batch transforms], and a dataset may hand out its own memory) or it must be pinned.
Tensor to_float(const Tensor& data, bool pinned, bool must_own) {
  if (data.dtype() != DType::U8) {
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

struct DataLoader::Epoch {
  std::vector<int64_t> order;
  int64_t num_batches = 0;
  int64_t consumed = 0;

  // Shared with the background thread, under `mutex`.
  std::mutex mutex;
  std::condition_variable not_full;
  std::condition_variable not_empty;
  std::deque<Prepared> ready;
  bool stop = false;
  std::thread thread;

  ~Epoch() {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    not_full.notify_all();
    if (thread.joinable()) thread.join();
  }
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  STRATA_CHECK(dataset_ != nullptr, InvalidArgumentError, "DataLoader: the dataset is null");
  STRATA_CHECK(options_.batch_size > 0, InvalidArgumentError, "DataLoader: batch_size must be positive, got {}",
               options_.batch_size);
  STRATA_CHECK(options_.prefetch >= 0, InvalidArgumentError, "DataLoader: prefetch must be non-negative, got {}",
               options_.prefetch);
  options_.device = resolve(options_.device);
  check_device(options_.device);
  STRATA_CHECK(!(options_.convert_on_device.value_or(false) && options_.transform), InvalidArgumentError,
               "DataLoader: convert_on_device cannot be set with a transform, which takes f32 host batches");
  convert_on_device_ = options_.convert_on_device.value_or(!options_.device.is_cpu() && !options_.transform);
}

DataLoader::~DataLoader() = default;

int64_t DataLoader::size() const {
  const int64_t n = dataset_size(*dataset_);
  const int64_t b = options_.batch_size;
  return n / b + (options_.drop_last || n % b == 0 ? 0 : 1);
}

void DataLoader::set_first_batch(int64_t batch) {
  STRATA_CHECK(batch >= 0 && batch <= size(), InvalidArgumentError,
               "DataLoader: set_first_batch({}) is outside an epoch of {} batches", batch, size());
  first_batch_ = batch;
}

namespace {

// Prepares batch `k` of an epoch in host memory. Runs on the background thread when prefetching.
// u8 data stays u8 when `convert_on_device` (Note [Where bytes become floats]).
Example prepare(const Dataset& dataset, const DataLoaderOptions& options, bool convert_on_device,
                const std::vector<int64_t>& order, int64_t k) {
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
  if (convert_on_device && batch.data.dtype() == DType::U8) {
    batch.data = batch.data.contiguous();
  } else {
    batch.data = to_float(batch.data, options.pin_memory, static_cast<bool>(options.transform));
  }
  if (options.transform) {
    batch.data = options.transform(std::move(batch.data));
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
  running_.reset();  // ends the previous epoch, joining its thread, before its transform state is used again
  auto epoch = std::make_unique<Epoch>();
  const int64_t n = dataset_size(*dataset_);
  if (options_.shuffle) {
    epoch->order = permutation(n, options_.seed, epoch_);
  } else {
    epoch->order.resize(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) epoch->order[static_cast<std::size_t>(i)] = i;
  }
  epoch->num_batches = size();
  epoch->consumed = std::min(first_batch_, epoch->num_batches);
  first_batch_ = 0;
  ++epoch_;
  if (options_.prefetch > 0 && epoch->consumed < epoch->num_batches) {
    Epoch* e = epoch.get();
    epoch->thread = std::thread([this, e, first = epoch->consumed] {
      for (int64_t k = first; k < e->num_batches; ++k) {
        Prepared item;
        try {
          item.batch = prepare(*dataset_, options_, convert_on_device_, e->order, k);
        } catch (...) {
          item.error = std::current_exception();
        }
        std::unique_lock lock(e->mutex);
        e->not_full.wait(lock, [&] { return e->stop || static_cast<int64_t>(e->ready.size()) < options_.prefetch; });
        if (e->stop) return;
        const bool failed = item.error != nullptr;
        e->ready.push_back(std::move(item));
        lock.unlock();
        e->not_empty.notify_one();
        if (failed) return;
      }
    });
  }
  running_ = std::move(epoch);
  return Iterator(this);
}

bool DataLoader::next(Batch& out) {
  if (running_ == nullptr) return false;
  Epoch& e = *running_;
  if (e.consumed >= e.num_batches) return false;

  Example host;
  if (options_.prefetch > 0) {
    Prepared item;
    {
      std::unique_lock lock(e.mutex);
      if (e.ready.empty()) {
        const auto start = std::chrono::steady_clock::now();
        e.not_empty.wait(lock, [&] { return !e.ready.empty(); });
        stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      item = std::move(e.ready.front());
      e.ready.pop_front();
    }
    e.not_full.notify_one();
    if (item.error) {
      e.consumed = e.num_batches;  // the thread has stopped; the epoch ends here
      std::rethrow_exception(item.error);
    }
    host = std::move(item.batch);
  } else {
    // Without prefetch the consumer waits for every batch while it is prepared.
    const auto start = std::chrono::steady_clock::now();
    try {
      host = prepare(*dataset_, options_, convert_on_device_, e.order, e.consumed);
    } catch (...) {
      e.consumed = e.num_batches;
      throw;
    }
    stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  ++e.consumed;
  ++stats_.batches;

  // The host batch may go as soon as its copies are queued (see Note [Overlapping copies]).
  out.data = host.data.to(options_.device, options_.non_blocking);
  if (out.data.dtype() == DType::U8 && convert_on_device_) out.data = to_float_on_device(out.data);
  out.target = host.target.to(options_.device, options_.non_blocking);
  return true;
}

}  // namespace strata::data
