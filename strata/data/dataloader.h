#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>

#include "strata/core/device.h"
#include "strata/data/dataset.h"
#include "strata/data/transforms.h"

namespace strata::data {

/// A batch as the loader hands it out: already on the loader's device.
struct Batch {
  Tensor data;
  Tensor target;
};

/// How a DataLoader batches: `DataLoader loader(ds, {.batch_size = 64, .shuffle = true, .prefetch = 2})`.
struct DataLoaderOptions {
  int64_t batch_size = 1;
  /// A new order every epoch, drawn from (seed, epoch) only: runs are reproducible.
  bool shuffle = false;
  uint64_t seed = 0;
  /// Leaves out the last batch when it would be smaller than batch_size.
  bool drop_last = false;
  /// Batches prepared ahead by a background thread; 0 prepares each batch on the caller's thread when asked.
  int64_t prefetch = 0;
  /// Prepares batches in page-locked host memory, so copies to a GPU can run asynchronously.
  bool pin_memory = false;
  /// Where the batches are delivered.
  Device device = kCPU;
  /// Copies to the device without waiting for them (effective from pinned memory; see Note [Overlapping copies]).
  bool non_blocking = true;
  /// u8 data becomes f32 in [0, 1] (x / 255, as torchvision's ToTensor) when set; else batches keep the dataset's
  /// dtype and values, as PyTorch's default_collate does (Note [Where bytes become floats]).
  bool scale_bytes = false;
  /// Applied to each batch's data on the host, after scale_bytes (see Note [Batch transforms]).
  Transform transform = nullptr;
  /// Where scale_bytes converts (Note [Where bytes become floats]): true on `device`, after the copy; false on the
  /// host, before it; unset lets the loader choose: on the device for a device that is not a CPU and no transform,
  /// else on the host. Both give the same bits. True with a transform is an InvalidArgumentError: transforms take
  /// host batches.
  std::optional<bool> convert_on_device = std::nullopt;
};

/// Counters of one loader, for tuning: how long the consumer waited for batches that were not ready yet.
struct DataLoaderStats {
  int64_t batches = 0;
  double wait_seconds = 0.0;
};

/// Iterates over a dataset in batches: `for (const Batch& b : loader) { ... }`. Each begin() starts an epoch of its
/// own, with the next epoch number: iterations are independent of each other (nested loops, two at once, several
/// threads each iterating), as in PyTorch. The data of a batch is the dataset's dtype, or f32 in [0, 1] for u8 data
/// with scale_bytes; the target is the dataset's. An exception while preparing a batch (in the dataset or a
/// transform) reaches the consumer at that batch, and ends that iteration. The loader's methods are thread-safe.
class DataLoader {
  struct Epoch;
  struct State;

 public:
  /// Throws InvalidArgumentError for a null dataset or bad options, DeviceUnavailableError for an absent device.
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Batches per epoch.
  int64_t size() const;
  /// The next iteration is epoch `epoch` (the ones after it epoch+1, ...); it decides the shuffled order.
  void set_epoch(uint64_t epoch);
  /// The epoch the next iteration will be.
  uint64_t epoch() const;
  /// The next iteration starts at its batch `batch` (0 to size()), leaving out the ones before it, in the same
  /// order: how a run resumes inside an epoch. Later iterations start at their first batch again.
  void set_first_batch(int64_t batch);
  const DataLoaderOptions& options() const;
  DataLoaderStats stats() const;

  /// One iteration. Copies share its position; it keeps what it needs alive, so it may outlive the loader. The
  /// last copy to go stops its background thread (after the batch it is preparing).
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = const Batch*;
    using reference = const Batch&;

    Iterator() = default;
    const Batch& operator*() const { return batch_; }
    const Batch* operator->() const { return &batch_; }
    Iterator& operator++() {
      advance();
      return *this;
    }
    /// Equal when both are finished (the end), or both are the same iteration.
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.epoch_ == b.epoch_; }

   private:
    friend class DataLoader;
    explicit Iterator(std::shared_ptr<Epoch> epoch);
    void advance();
    std::shared_ptr<Epoch> epoch_;
    Batch batch_;
  };

  /// Starts an epoch and returns its first batch.
  Iterator begin();
  Iterator end() const { return Iterator(); }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace strata::data
