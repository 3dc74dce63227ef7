#include "strata/data/dataloader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <thread>

#include "strata/core/error.h"
#include "strata/runtime/stream.h"
#include "strata/runtime/transfer.h"
#include "strata/tensor/factories.h"
#include "test_devices.h"

namespace strata {
namespace {

using data::Batch;
using data::DataLoader;
using data::DataLoaderOptions;

// n examples: data[i] is a 2x2 u8 image filled with i, target[i] = 100 + i.
std::shared_ptr<data::TensorDataset> numbered(int64_t n) {
  std::vector<uint8_t> pixels;
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < n; ++i) {
    pixels.insert(pixels.end(), 4, static_cast<uint8_t>(i));
    targets.push_back(100 + i);
  }
  return std::make_shared<data::TensorDataset>(tensor<uint8_t>(pixels, {n, 2, 2}), tensor<int64_t>(targets, {n}));
}

// The targets of every batch of one epoch.
std::vector<std::vector<int64_t>> epoch_targets(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (const Batch& b : loader) out.push_back(b.target.to_vector<int64_t>());
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

TEST(DataLoader, BatchesInOrderWithAShortLastBatch) {
  DataLoader loader(numbered(10), {.batch_size = 4});
  EXPECT_EQ(loader.size(), 3);
  EXPECT_EQ(epoch_targets(loader),
            (std::vector<std::vector<int64_t>>{{100, 101, 102, 103}, {104, 105, 106, 107}, {108, 109}}));
}

TEST(DataLoader, DropLastLeavesOutTheShortBatch) {
  DataLoader loader(numbered(10), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(loader.size(), 2);
  EXPECT_EQ(epoch_targets(loader).size(), 2u);
}

TEST(DataLoader, U8DataKeepsItsDtypeAndValues) {
  // As PyTorch's default_collate: what the dataset holds, not a conversion behind the user's back.
  DataLoader loader(numbered(256), {.batch_size = 256, .prefetch = 1});
  const Batch b = *loader.begin();
  EXPECT_EQ(b.data.dtype(), DType::U8);
  EXPECT_EQ(b.data.to_vector<uint8_t>()[4 * 51], 51);
}

TEST(DataLoader, ScaleBytesMakesU8DataF32InUnitRange) {
  DataLoader loader(numbered(256), {.batch_size = 256, .scale_bytes = true});
  const Batch b = *loader.begin();
  EXPECT_EQ(b.data.dtype(), DType::F32);
  EXPECT_EQ(b.data.shape(), (Shape{256, 2, 2}));
  const std::vector<float> v = b.data.to_vector<float>();
  EXPECT_FLOAT_EQ(v[0], 0.0f);
  EXPECT_FLOAT_EQ(v[4 * 51], 51.0f / 255.0f);
  EXPECT_FLOAT_EQ(v.back(), 1.0f);
  EXPECT_EQ(b.target.dtype(), DType::I64);
}

TEST(DataLoader, ShuffleIsAPermutationThatChangesEveryEpochAndIsReproducible) {
  DataLoader a(numbered(50), {.batch_size = 8, .shuffle = true, .seed = 42});
  DataLoader b(numbered(50), {.batch_size = 8, .shuffle = true, .seed = 42});
  const auto a0 = flat(epoch_targets(a));
  const auto a1 = flat(epoch_targets(a));
  std::vector<int64_t> sorted = a0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(50);
  for (int64_t i = 0; i < 50; ++i) expected[static_cast<std::size_t>(i)] = 100 + i;
  EXPECT_EQ(sorted, expected);
  EXPECT_NE(a0, expected) << "not shuffled";
  EXPECT_NE(a0, a1) << "every epoch should differ";
  EXPECT_EQ(flat(epoch_targets(b)), a0) << "the same seed gives the same order";
  EXPECT_EQ(flat(epoch_targets(b)), a1);
  b.set_epoch(0);
  EXPECT_EQ(flat(epoch_targets(b)), a0) << "set_epoch replays an epoch";
  DataLoader other(numbered(50), {.batch_size = 8, .shuffle = true, .seed = 43});
  EXPECT_NE(flat(epoch_targets(other)), a0);
}

TEST(DataLoader, PrefetchGivesTheSameBatchesAsNoPrefetch) {
  auto options = [](int64_t prefetch) {
    return DataLoaderOptions{.batch_size = 7,
                             .shuffle = true,
                             .seed = 5,
                             .prefetch = prefetch,
                             .scale_bytes = true,
                             .transform = data::RandomHorizontalFlip(0.5, 9)};
  };
  DataLoader plain(numbered(40), options(0));
  DataLoader ahead(numbered(40), options(3));
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::vector<float>> p, q;
    for (const Batch& b : plain) p.push_back(b.data.to_vector<float>());
    for (const Batch& b : ahead) q.push_back(b.data.to_vector<float>());
    EXPECT_EQ(p, q) << "epoch " << epoch;
  }
}

TEST(DataLoader, TransformRunsOnTheFloatBatch) {
  DataLoader loader(numbered(3), {.batch_size = 3, .scale_bytes = true, .transform = data::Normalize({0.5f}, {0.5f})});
  const std::vector<float> v = (*loader.begin()).data.to_vector<float>();
  EXPECT_FLOAT_EQ(v[0], -1.0f);
  EXPECT_FLOAT_EQ(v[4], (1.0f / 255.0f - 0.5f) / 0.5f);
}

TEST(DataLoader, InPlaceTransformsNeverTouchTheDataset) {
  auto ds =
      std::make_shared<data::TensorDataset>(tensor<float>({1, 2, 3, 4}, {4, 1, 1}), tensor<int64_t>({0, 1, 2, 3}));
  DataLoader loader(ds, {.batch_size = 2, .transform = data::Normalize({1.0f}, {1.0f})});
  for (const Batch& b : loader) (void)b;
  EXPECT_EQ(ds->data().to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

// A dataset that fails on one index, and counts the batches asked of it.
class FailingDataset : public data::TensorDataset {
 public:
  FailingDataset(int64_t n, int64_t bad) : TensorDataset(numbered(n)->data(), numbered(n)->target()), bad_(bad) {}
  data::Example get_batch(const Tensor& indices) const override {
    ++calls;
    for (int64_t i : indices.to_vector<int64_t>()) {
      if (i == bad_) throw IOError("example " + std::to_string(i) + " is unreadable");
    }
    return TensorDataset::get_batch(indices);
  }
  mutable std::atomic<int> calls{0};

 private:
  int64_t bad_;
};

class DataLoaderErrors : public ::testing::TestWithParam<int64_t> {};

TEST_P(DataLoaderErrors, ExceptionReachesTheConsumerAtTheFailingBatch) {
  DataLoader loader(std::make_shared<FailingDataset>(20, 9), {.batch_size = 4, .prefetch = GetParam()});
  std::vector<std::vector<int64_t>> seen;
  try {
    for (const Batch& b : loader) seen.push_back(b.target.to_vector<int64_t>());
    FAIL() << "no exception";
  } catch (const IOError& e) {
    EXPECT_STREQ(e.what(), "example 9 is unreadable");
  }
  EXPECT_EQ(seen, (std::vector<std::vector<int64_t>>{{100, 101, 102, 103}, {104, 105, 106, 107}}));
  // The failed epoch is over; the next one starts afresh and fails at the same place.
  EXPECT_THROW(epoch_targets(loader), IOError);
}

INSTANTIATE_TEST_SUITE_P(Prefetch, DataLoaderErrors, ::testing::Values(0, 2));

// A dataset that takes a while per batch.
class SlowDataset : public FailingDataset {
 public:
  SlowDataset() : FailingDataset(1000, -1) {}
  data::Example get_batch(const Tensor& indices) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return FailingDataset::get_batch(indices);
  }
};

TEST(DataLoader, DestroyingMidEpochStopsTheThread) {
  auto ds = std::make_shared<SlowDataset>();
  {
    DataLoader loader(ds, {.batch_size = 2, .prefetch = 3});
    auto it = loader.begin();
    ++it;
  }
  const int after_destruction = ds->calls.load();
  EXPECT_LE(after_destruction, 2 + 3 + 1) << "the thread prepares at most `prefetch` batches ahead, plus one";
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(ds->calls.load(), after_destruction) << "no work after the loader is gone";
}

TEST(DataLoader, BreakingOutAndStartingANewEpochWorks) {
  DataLoader loader(numbered(30), {.batch_size = 5, .prefetch = 2});
  for (const Batch& b : loader) {
    EXPECT_EQ(b.target.to_vector<int64_t>()[0], 100);
    break;
  }
  EXPECT_EQ(flat(epoch_targets(loader)).size(), 30u);
  EXPECT_EQ(loader.epoch(), 2u);
}

TEST(DataLoader, PinMemoryPreparesPinnedHostBatches) {
  DataLoader loader(numbered(8), {.batch_size = 4, .prefetch = 1, .pin_memory = true});
  for (const Batch& b : loader) {
    EXPECT_TRUE(b.data.is_pinned());
    EXPECT_TRUE(b.target.is_pinned());
  }
}

TEST(DataLoader, EmptyDatasetGivesNoBatches) {
  DataLoader loader(numbered(0), {.batch_size = 4, .prefetch = 2});
  EXPECT_EQ(loader.size(), 0);
  EXPECT_TRUE(epoch_targets(loader).empty());
}

TEST(DataLoader, StatsCountBatches) {
  DataLoader loader(numbered(10), {.batch_size = 3, .prefetch = 1});
  epoch_targets(loader);
  EXPECT_EQ(loader.stats().batches, 4);
  EXPECT_GE(loader.stats().wait_seconds, 0.0);
}

TEST(DataLoader, BadOptionsAreRejected) {
  EXPECT_THROW(DataLoader(numbered(4), {.batch_size = 0}), InvalidArgumentError);
  EXPECT_THROW(DataLoader(numbered(4), {.prefetch = -1}), InvalidArgumentError);
  EXPECT_THROW(DataLoader(nullptr), InvalidArgumentError);
  if (!cuda::is_available()) {
    EXPECT_THROW(DataLoader(numbered(4), {.device = Device("cuda:0")}), DeviceUnavailableError);
  }
}

// A dataset whose size() is wrong: the loader must say so, not size a vector with it.
class NegativeDataset : public data::Dataset {
 public:
  int64_t size() const override { return -3; }
  data::Example get(int64_t) const override { return {}; }
};

TEST(DataLoader, SizesAtTheEdgesOfInt64) {
  // (n + b - 1) / b would overflow.
  DataLoader huge_batches(numbered(4), {.batch_size = std::numeric_limits<int64_t>::max()});
  EXPECT_EQ(huge_batches.size(), 1);
  EXPECT_EQ(epoch_targets(huge_batches), (std::vector<std::vector<int64_t>>{{100, 101, 102, 103}}));
  for (bool shuffle : {false, true}) {
    DataLoader negative(std::make_shared<NegativeDataset>(), {.shuffle = shuffle});
    EXPECT_THROW((void)negative.size(), InvalidArgumentError);
    try {
      (void)negative.begin();
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("size() is -3"), std::string::npos) << e.what();
    }
  }
}

TEST(DataLoader, ATransformMustKeepTheBatchSize) {
  DataLoader loader(numbered(4), {.batch_size = 2, .transform = [](Tensor batch) { return batch.reshape({-1}); }});
  try {
    (void)loader.begin();
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("for a batch of 2"), std::string::npos) << e.what();
  }
}

// get() only: the loader goes through Dataset::get_batch's default, which stacks examples.
class SquaresDataset : public data::Dataset {
 public:
  int64_t size() const override { return 5; }
  data::Example get(int64_t i) const override {
    return {full({3}, static_cast<float>(i * i)), scalar_tensor(i, DType::I64)};
  }
};

TEST(DataLoader, DefaultGetBatchStacksExamples) {
  DataLoader loader(std::make_shared<SquaresDataset>(), {.batch_size = 2});
  const Batch b = *loader.begin();
  EXPECT_EQ(b.data.shape(), (Shape{2, 3}));
  EXPECT_EQ(b.data.to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
}

TEST(TensorDataset, ChecksShapesAndIndices) {
  EXPECT_THROW(data::TensorDataset(zeros({3, 2}), zeros({4})), ShapeError);
  const auto ds = numbered(3);
  EXPECT_THROW(ds->get(3), IndexError);
  EXPECT_THROW(ds->get_batch(tensor<int64_t>({0, 5})), IndexError);
  EXPECT_EQ(ds->get(2).target.item<int64_t>(), 102);
}

TEST(TensorDataset, GetBatchGathersContiguousAndStridedData) {
  const Tensor base = tensor<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  const Tensor columns(base.storage(), DType::F32, {3, 2}, {1, 3}, 0);  // example i is column i: {i, i + 3}
  const data::TensorDataset strided(columns, tensor<int64_t>({10, 11, 12}));
  const data::Example b = strided.get_batch(tensor<int64_t>({2, 0}));
  EXPECT_EQ(b.data.to_vector<float>(), (std::vector<float>{2, 5, 0, 3}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{12, 10}));
  const data::TensorDataset dense(base, tensor<int64_t>({20, 21}));
  EXPECT_EQ(dense.get_batch(tensor<int64_t>({1, 1, 0})).data.to_vector<float>(),
            (std::vector<float>{3, 4, 5, 3, 4, 5, 0, 1, 2}));
}

class DataLoaderOnDevice : public ::testing::TestWithParam<Device> {};

TEST_P(DataLoaderOnDevice, BatchesArriveOnTheDeviceWithTheSameValues) {
  const Device device = GetParam();
  DataLoader host(numbered(20), {.batch_size = 6, .shuffle = true, .seed = 1, .scale_bytes = true});
  DataLoader loader(numbered(20), {.batch_size = 6,
                                   .shuffle = true,
                                   .seed = 1,
                                   .prefetch = 2,
                                   .pin_memory = true,
                                   .device = device,
                                   .scale_bytes = true});
  std::vector<std::vector<float>> expected;
  for (const Batch& b : host) expected.push_back(b.data.to_vector<float>());
  std::size_t k = 0;
  for (const Batch& b : loader) {
    EXPECT_EQ(b.data.device(), device);
    EXPECT_EQ(b.target.device(), device);
    EXPECT_EQ(b.data.to_vector<float>(), expected.at(k++));
  }
  EXPECT_EQ(k, expected.size());
}

// Note [Where bytes become floats]: u8 batches converted on the device after the copy are bit for bit the ones
// converted on the host before it, for every byte value, and the copy then moves a quarter of the data's bytes. Left
// to itself, the loader converts on the device for a GPU and on the host for a CPU device.
TEST_P(DataLoaderOnDevice, BytesBecomeTheSameFloatsOnTheDeviceAfterAQuarterOfTheCopy) {
  const Device device = GetParam();
  const std::optional<bool> modes[] = {false, true, std::nullopt};
  std::vector<std::vector<uint32_t>> bits[3];
  int64_t copied[3] = {0, 0, 0};
  for (int m = 0; m < 3; ++m) {
    DataLoader loader(numbered(256), {.batch_size = 100, .shuffle = true, .seed = 3, .prefetch = 2,
                                      .device = device, .scale_bytes = true, .convert_on_device = modes[m]});
    reset_transfer_counters();
    for (const Batch& b : loader) {
      ASSERT_EQ(b.data.dtype(), DType::F32);
      EXPECT_EQ(b.data.device(), device);
      const std::vector<float> v = b.data.to_vector<float>();
      std::vector<uint32_t> raw(v.size());
      std::memcpy(raw.data(), v.data(), v.size() * sizeof(float));
      bits[m].push_back(raw);
    }
    const TransferCounters c = transfer_counters();
    copied[m] = c.host_to_device_bytes + c.device_to_device_bytes;
  }
  ASSERT_EQ(bits[0].size(), 3u);
  EXPECT_EQ(bits[1], bits[0]);
  EXPECT_EQ(bits[2], bits[0]);
  // Every byte value went through both paths: examples 0..255 hold them.
  std::set<uint32_t> seen;
  for (const auto& batch : bits[1]) seen.insert(batch.begin(), batch.end());
  EXPECT_EQ(seen.size(), 256u);
  if (device != kCPU) {
    // 256 examples of 4 pixels and an i64 target: 4 + 8 bytes each as bytes, 16 + 8 as floats.
    EXPECT_EQ(copied[0], 256 * (16 + 8));
    EXPECT_EQ(copied[1], 256 * (4 + 8));
    EXPECT_EQ(copied[2], device.is_cpu() ? copied[0] : copied[1]);
  }
}

TEST(DataLoader, ATransformKeepsTheConversionOnTheHost) {
  // Transforms take f32 host batches (Note [Batch transforms]), so they cannot follow a conversion on the device.
  const data::Transform identity = [](Tensor t) { return t; };
  EXPECT_THROW(DataLoader(numbered(4), {.scale_bytes = true, .transform = identity, .convert_on_device = true}),
               InvalidArgumentError);
  DataLoader loader(numbered(4),
                    {.batch_size = 4, .scale_bytes = true, .transform = identity, .convert_on_device = false});
  const Batch b = *loader.begin();
  EXPECT_EQ(b.data.dtype(), DType::F32);
  EXPECT_FLOAT_EQ(b.data.to_vector<float>().back(), 3.0f / 255.0f);
}

INSTANTIATE_TEST_SUITE_P(Devices, DataLoaderOnDevice, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
