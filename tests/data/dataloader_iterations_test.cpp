// Each begin() of a DataLoader is an iteration of its own, as each iter() of PyTorch's DataLoader is.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <thread>
#include <vector>

#include "strata/data/dataloader.h"
#include "strata/tensor/factories.h"

namespace strata {
namespace {

using data::Batch;
using data::DataLoader;

std::shared_ptr<data::TensorDataset> numbered(int64_t n) {
  return std::make_shared<data::TensorDataset>(arange(n, DType::F32).reshape({n, 1}), arange(n, DType::I64));
}

std::vector<int64_t> targets_of(DataLoader::Iterator it, const DataLoader::Iterator& end) {
  std::vector<int64_t> out;
  for (; it != end; ++it) {
    for (int64_t t : it->target.to_vector<int64_t>()) out.push_back(t);
  }
  return out;
}

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> r(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[static_cast<std::size_t>(i)] = i;
  return r;
}

class DataLoaderIterations : public ::testing::TestWithParam<int64_t> {};  // prefetch

TEST_P(DataLoaderIterations, NestedLoopsEachRunAWholeEpoch) {
  DataLoader loader(numbered(6), {.batch_size = 2, .prefetch = GetParam()});
  int outer = 0, inner = 0;
  for (const Batch& a : loader) {
    (void)a;
    ++outer;
    for (const Batch& b : loader) {
      (void)b;
      ++inner;
    }
  }
  EXPECT_EQ(outer, 3);
  EXPECT_EQ(inner, 9);
}

TEST_P(DataLoaderIterations, ANewIterationLeavesARunningOneWhereItWas) {
  DataLoader loader(numbered(6), {.batch_size = 2, .prefetch = GetParam()});
  auto it = loader.begin();
  EXPECT_EQ(it->target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ((*loader.begin()).target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  ++it;
  EXPECT_EQ(it->target.to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
}

TEST_P(DataLoaderIterations, TwoIterationsSideBySidePairTheSameBatches) {
  DataLoader loader(numbered(7), {.batch_size = 3, .prefetch = GetParam()});
  auto a = loader.begin(), b = loader.begin();
  int pairs = 0;
  for (; a != loader.end() && b != loader.end(); ++a, ++b, ++pairs) {
    EXPECT_EQ(a->target.to_vector<int64_t>(), b->target.to_vector<int64_t>());
  }
  EXPECT_EQ(pairs, 3);
  EXPECT_TRUE(a == loader.end() && b == loader.end());
}

TEST_P(DataLoaderIterations, AnIterationMayOutliveItsLoader) {
  std::optional<DataLoader> loader(std::in_place, numbered(10), data::DataLoaderOptions{.batch_size = 4,
                                                                                         .prefetch = GetParam()});
  auto it = loader->begin();
  loader.reset();
  EXPECT_EQ(targets_of(it, DataLoader::Iterator()), range(10));
}

TEST_P(DataLoaderIterations, ThreadsSharingALoaderEachGetAWholeShuffledEpoch) {
  DataLoader loader(numbered(200), {.batch_size = 8, .shuffle = true, .seed = 3, .prefetch = GetParam()});
  std::vector<std::vector<int64_t>> seen(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int epoch = 0; epoch < 5; ++epoch) {
        std::vector<int64_t> got = targets_of(loader.begin(), loader.end());
        std::sort(got.begin(), got.end());
        if (got != range(200)) return;
        seen[t].push_back(epoch);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : seen) EXPECT_EQ(s.size(), 5u);
  EXPECT_EQ(loader.epoch(), 20u) << "every iteration took an epoch number of its own";
  EXPECT_EQ(loader.stats().batches, 20 * 25);
}

INSTANTIATE_TEST_SUITE_P(Prefetch, DataLoaderIterations, ::testing::Values(0, 2));

}  // namespace
}  // namespace strata
