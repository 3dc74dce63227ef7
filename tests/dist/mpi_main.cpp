// strata/dist between processes: run under `mpiexec -n 2` (tests/dist/CMakeLists.txt registers it with ctest). Every
// rank runs every test; each test issues the same collectives in the same order on every rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "strata/core/error.h"
#include "strata/dist/ddp.h"
#include "strata/dist/device_collectives.h"
#include "strata/dist/process_group.h"
#include "strata/nn/functional.h"
#include "strata/nn/layers.h"
#include "strata/optim/sgd.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "dist/fake_collectives.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

dist::ProcessGroup& world() { return dist::world(); }

TEST(MpiWorld, HasTheLaunchersRanks) {
  const auto info = dist::launch_info();
  EXPECT_EQ(world().backend_name(), "mpi");
  EXPECT_EQ(world().size(), info.size);
  EXPECT_EQ(world().rank(), info.rank);
  EXPECT_GE(world().size(), 2) << "run under mpiexec -n 2 or more";
}

// rank r holds (r + 1) * [1, 2, 3, 4]; the sum over ranks is s * [1, 2, 3, 4] with s = n (n + 1) / 2.
TEST(MpiCollectives, AllReduceOfEveryDtypeMatchesAHandComputation) {
  const int n = world().size(), r = world().rank();
  const double s = n * (n + 1) / 2.0;
  for (const DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor base = tensor<double>({1, 2, 3, 4}).to(dtype);
    Tensor sum_t = base * (r + 1), max_t = base * (r + 1), min_t = base * (r + 1);
    world().all_reduce(sum_t, dist::ReduceOp::Sum)->wait();
    world().all_reduce(max_t, dist::ReduceOp::Max)->wait();
    world().all_reduce(min_t, dist::ReduceOp::Min)->wait();
    EXPECT_EQ(sum_t.dtype(), dtype);
    EXPECT_EQ(sum_t.to_vector<double>(), (base * s).to_vector<double>());
    EXPECT_EQ(max_t.to_vector<double>(), (base * n).to_vector<double>());
    EXPECT_EQ(min_t.to_vector<double>(), base.to_vector<double>());
    if (is_floating(dtype)) {
      Tensor avg_t = base * (r + 1);
      world().all_reduce(avg_t, dist::ReduceOp::Avg)->wait();
      EXPECT_EQ(avg_t.to_vector<double>(), (base * (s / n)).to_vector<double>());
    }
  }
}

TEST(MpiCollectives, BroadcastAllGatherReduceScatterAndBarrier) {
  const int n = world().size(), r = world().rank();
  Tensor b = full({3}, static_cast<float>(r * 10));
  world().broadcast(b, n - 1)->wait();
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>(3, static_cast<float>((n - 1) * 10))));

  const Tensor mine = tensor<int64_t>({r, 100 + r});
  Tensor all = zeros({n, 2}, DType::I64);
  world().all_gather(all, mine)->wait();
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(all[k].to_vector<int64_t>(), (std::vector<int64_t>{k, 100 + k}));
  }

  // Row k of every rank's input is k + r; rank k receives the sum over r of (k + r) in each of its 3 elements.
  Tensor input = arange(0, n, 1, DType::F32).reshape({n, 1}).expand({n, 3}).contiguous() + static_cast<double>(r);
  Tensor output = zeros({3});
  world().reduce_scatter(output, input, dist::ReduceOp::Sum)->wait();
  const float expected = static_cast<float>(n * r + n * (n - 1) / 2);
  EXPECT_EQ(output.to_vector<float>(), (std::vector<float>(3, expected)));
  world().barrier()->wait();
}

TEST(MpiCollectives, AVirtualCpuDeviceTensorIsReducedInPlace) {
  Tensor t = full({5}, 1.0f);
  world().all_reduce(t)->wait();
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>(5, static_cast<float>(world().size()))));
}

TEST(MpiCollectives, MismatchedShapesAreAnErrorNamingBothOnEveryRank) {
  Tensor t = zeros({world().rank() == 0 ? 4 : 5});
  try {
    world().all_reduce(t)->wait();
    ADD_FAILURE() << "no error";
  } catch (const CollectiveMismatchError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 0 called all_reduce of [4] f32 (sum)"));
    EXPECT_THAT(e.what(), HasSubstr("rank 1 called all_reduce of [5] f32 (sum)"));
  }
  Tensor dtype_differs = world().rank() == 0 ? zeros({2}) : zeros({2}, DType::F64);
  EXPECT_THROW(world().all_reduce(dtype_differs)->wait(), CollectiveMismatchError);
  // The group is still usable.
  Tensor ok = ones({2});
  world().all_reduce(ok)->wait();
  EXPECT_EQ(ok.to_vector<float>()[0], static_cast<float>(world().size()));
  Tensor strided = ones({2, 3}).t();
  EXPECT_THROW(world().all_reduce(strided), InvalidArgumentError);  // refused before any rank communicates
}

// A device group over the MPI world, through the logging library of fake_collectives.h on CPU tensors: rank 0's
// group id reaches every rank through the host group, and ranks that disagree get an error, not a hang.
TEST(MpiDeviceGroup, TheGroupIdComesFromRankZeroAndDisagreementIsAnError) {
  auto log = std::make_shared<testing::FakeLog>();
  dist::register_collective_library(DeviceType::CPU, std::make_shared<testing::FakeLibrary>(log));
  std::string why;
  auto group = dist::make_device_group(world(), DeviceType::CPU, {}, &why);
  ASSERT_NE(group, nullptr) << why;
  Tensor t = ones({4});
  group->all_reduce(t)->wait();
  {
    std::lock_guard lock(log->mutex);
    EXPECT_EQ(log->ids, world().rank() == 0 ? 1 : 0);
    EXPECT_EQ(log->id, (std::vector<uint8_t>{7, 8, 9}));
    EXPECT_EQ(log->rank, world().rank());
    EXPECT_EQ(log->size, world().size());
  }
  Tensor differs = zeros({world().rank() == 0 ? 4 : 5});
  try {
    group->all_reduce(differs)->wait();
    ADD_FAILURE() << "no error";
  } catch (const CollectiveMismatchError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 0 called all_reduce of [4] f32 (sum)"));
    EXPECT_THAT(e.what(), HasSubstr("rank 1 called all_reduce of [5] f32 (sum)"));
  }
  {
    std::lock_guard lock(log->mutex);
    EXPECT_EQ(log->calls, (std::vector<std::string>{"all_reduce sum"}));  // the mismatch never reached the library
  }
  group.reset();
  dist::register_collective_library(DeviceType::CPU, nullptr);
}

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(world().rank() + 1);  // a different start on each rank: DDP broadcasts rank 0's
  return std::make_shared<nn::Sequential>(nn::Linear(6, 16), nn::ReLU(), nn::Linear(16, 16), nn::ReLU(),
                                          nn::Linear(16, 3));
}

struct GlobalBatches {
  std::vector<Tensor> x, y;  // the same on every rank
};

GlobalBatches global_batches(int steps, int64_t batch) {
  manual_seed(1234);
  GlobalBatches g;
  for (int i = 0; i < steps; ++i) {
    g.x.push_back(randn({batch, 6}));
    g.y.push_back(randint(0, 3, {batch}));
  }
  return g;
}

// The rows of a global batch that rank r trains on.
Tensor shard(const Tensor& t, int rank, int world_size) {
  const int64_t per = t.size(0) / world_size;
  return t.narrow(0, rank * per, per);
}

std::vector<std::vector<float>> values(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.to_vector<float>());
  return out;
}

constexpr int kSteps = 5;
constexpr int64_t kBatch = 16;

std::vector<std::vector<float>> train_ddp(const dist::DdpOptions& options) {
  const int n = world().size(), r = world().rank();
  auto model = mlp();
  dist::DistributedDataParallel ddp(model, world(), options);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  const GlobalBatches data = global_batches(kSteps, kBatch);
  for (int i = 0; i < kSteps; ++i) {
    sgd.zero_grad();
    nn::functional::cross_entropy((*model)(shard(data.x[i], r, n)), shard(data.y[i], r, n)).backward();
    sgd.step();
  }
  return values(*model);
}

TEST(MpiDdp, ParametersAreBitwiseEqualOnEveryRankAndToTheRankOrderSum) {
  const int n = world().size();
  const auto trained = train_ddp({});
  // Every rank holds the same bits.
  for (std::size_t p = 0; p < trained.size(); ++p) {
    const Tensor mine = tensor<float>(trained[p]);
    Tensor all = zeros({n, mine.numel()});
    world().all_gather(all, mine)->wait();
    for (int k = 0; k < n; ++k) {
      const auto theirs = all[k].to_vector<float>();
      EXPECT_EQ(std::memcmp(theirs.data(), trained[p].data(), theirs.size() * sizeof(float)), 0)
          << "parameter " << p << " differs on rank " << k;
    }
  }
  // One process that adds the ranks' gradients in rank order and divides by the world size: the same bits.
  manual_seed(1);  // rank 0's start, which DDP broadcast
  auto model = std::make_shared<nn::Sequential>(nn::Linear(6, 16), nn::ReLU(), nn::Linear(16, 16), nn::ReLU(),
                                                nn::Linear(16, 3));
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  // The global-batch reference: the same start, the mean loss of all kBatch rows.
  manual_seed(1);
  auto whole = std::make_shared<nn::Sequential>(nn::Linear(6, 16), nn::ReLU(), nn::Linear(16, 16), nn::ReLU(),
                                                nn::Linear(16, 3));
  optim::SGD whole_sgd(whole->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  const GlobalBatches data = global_batches(kSteps, kBatch);
  for (int i = 0; i < kSteps; ++i) {
    std::vector<Tensor> sums;
    for (int k = 0; k < n; ++k) {
      model->zero_grad();
      nn::functional::cross_entropy((*model)(shard(data.x[i], k, n)), shard(data.y[i], k, n)).backward();
      const auto params = model->parameters();
      for (std::size_t p = 0; p < params.size(); ++p) {
        if (k == 0) {
          sums.push_back(params[p].grad().clone());
        } else {
          sums[p] = sums[p] + params[p].grad();
        }
      }
    }
    auto params = model->parameters();
    for (std::size_t p = 0; p < params.size(); ++p) params[p].set_grad(sums[p] / static_cast<double>(n));
    sgd.step();
    whole_sgd.zero_grad();
    nn::functional::cross_entropy((*whole)(data.x[i]), data.y[i]).backward();
    whole_sgd.step();
  }
  const auto emulated = values(*model), global = values(*whole);
  for (std::size_t p = 0; p < trained.size(); ++p) {
    EXPECT_EQ(std::memcmp(emulated[p].data(), trained[p].data(), trained[p].size() * sizeof(float)), 0)
        << "parameter " << p << " differs from the rank-order sum";
    for (std::size_t i = 0; i < trained[p].size(); ++i) {
      EXPECT_NEAR(trained[p][i], global[p][i], 1e-5 + 1e-4 * std::abs(global[p][i])) << "parameter " << p;
    }
  }
}

TEST(MpiDdp, OneBucketAndManyTinyBucketsGiveTheSameBits) {
  dist::DdpOptions one;
  one.first_bucket_cap_bytes = one.bucket_cap_bytes = std::size_t{1} << 30;
  dist::DdpOptions tiny;
  tiny.first_bucket_cap_bytes = tiny.bucket_cap_bytes = 64;
  EXPECT_EQ(train_ddp(one), train_ddp(tiny));
}

TEST(MpiDdp, NoSyncAccumulatesLocallyAndTheNextBackwardAveragesTheSum) {
  const int n = world().size(), r = world().rank();
  auto model = mlp();
  dist::DistributedDataParallel ddp(model, world());
  const GlobalBatches data = global_batches(2, kBatch);
  {
    auto guard = ddp.no_sync();
    sum((*model)(shard(data.x[0], r, n))).backward();
  }
  const auto local = values(*model);  // unchanged, but the gradients are local for now
  sum((*model)(shard(data.x[1], r, n))).backward();
  // Each rank's gradient is now the average over ranks of (its two micro-batches' sum): the same everywhere.
  for (const Tensor& p : model->parameters()) {
    Tensor g = p.grad().reshape({-1}).contiguous();
    Tensor all = zeros({n, g.numel()});
    world().all_gather(all, g)->wait();
    EXPECT_EQ(all[0].to_vector<float>(), all[n - 1].to_vector<float>());
  }
  EXPECT_EQ(values(*model), local);
}

// Run on its own (tests/dist/CMakeLists.txt), with a short STRATA_DIST_TIMEOUT: rank 1 leaves without taking part,
// and rank 0's all-reduce must fail with a timeout that names it rather than hang.
TEST(MpiFailures, ARankThatLeavesMakesTheOthersFailWithinTheTimeout) {
  if (world().rank() != 0) return;
  Tensor t = ones({1000});
  try {
    world().all_reduce(t)->wait();
    ADD_FAILURE() << "no timeout";
  } catch (const CollectiveTimeoutError& e) {
    std::printf("rank 0 timed out as expected: %s\n", e.what());
    std::fflush(stdout);
    EXPECT_THAT(e.what(), HasSubstr("all_reduce of [1000] f32 (sum) on rank 0 of 2 did not finish within"));
  }
  EXPECT_THROW(world().barrier(), DistributedError) << "the group must refuse work after a timeout";
}

}  // namespace
}  // namespace strata
