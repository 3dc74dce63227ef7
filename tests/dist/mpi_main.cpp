// strata/dist between processes: run under `mpiexec -n 2` (tests/dist/CMakeLists.txt registers it with ctest). Every
// rank runs every test; each test issues the same collectives in the same order on every rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "dist/fake_collectives.h"
#include "strata/core/error.h"
#include "strata/dist/ddp.h"
#include "strata/dist/device_collectives.h"
#include "strata/dist/process_group.h"
#include "strata/nn/functional.h"
#include "strata/nn/layers.h"
#include "strata/optim/sgd.h"
#include "strata/runtime/registry.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "dist/two_heads.h"

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
  // f16 and bf16 need staging (MpiStaging below).
  for (const DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8}) {
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

// Note [Nothing staged behind the caller's back]: MPI reduces no 16-bit floats, so an f16 or bf16 reduction is
// refused on every rank before any communication, naming the ways on; moving them needs no arithmetic and no copy.
TEST(MpiCollectives, SixteenBitFloatsMoveAsTheyAreButAreNotReducedWithoutStaging) {
  ASSERT_EQ(std::getenv("STRATA_DIST_STAGE_THROUGH_HOST"), nullptr) << "run without staging";
  const int n = world().size(), r = world().rank();
  for (const DType dtype : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor t = full({3}, 1.5, dtype);
    EXPECT_THAT([&] { world().all_reduce(t); },
                ::testing::ThrowsMessage<DTypeError>(
                    AllOf(HasSubstr(fmt::format("all_reduce: MPI cannot reduce {} tensors; convert it to f32 yourself",
                                                dtype_name(dtype))),
                          HasSubstr("ProcessGroupOptions::stage_through_host"))));
    Tensor rows = zeros({n, 3}, dtype);
    EXPECT_THROW(world().reduce_scatter(t, rows), DTypeError);
    // Broadcast and all_gather compute nothing: they run without staging, on the 16-bit values.
    Tensor b = full({3}, 0.1 * (r + 1), dtype);
    world().broadcast(b, n - 1)->wait();
    EXPECT_EQ(b.to_vector<double>(), full({3}, 0.1 * n, dtype).to_vector<double>());
    Tensor all = zeros({n, 3}, dtype);
    world().all_gather(all, b)->wait();
    EXPECT_EQ(all[0].to_vector<double>(), b.to_vector<double>());
  }
  Tensor ok = ones({2});
  world().all_reduce(ok)->wait();  // the ranks are still in step
  EXPECT_EQ(ok.to_vector<float>()[0], static_cast<float>(n));
}

TEST(MpiCollectives, IsCompletedOnlyOnceTheResultIsThere) {
  Tensor t = ones({1 << 16});
  auto work = world().all_reduce(t);
  while (!work->is_completed()) std::this_thread::yield();
  EXPECT_EQ(t.to_vector<float>()[(1 << 16) - 1], static_cast<float>(world().size()));
  work->wait();
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

// NCCL between ranks, where each rank of this machine has a GPU of its own: what a machine with several GPUs should
// run first (docs/architecture.md, Processes); it has never run. Skipped together on every rank elsewhere.
TEST(MpiNccl, CollectivesOnEachRanksGpuGiveTheHandComputedResults) {
  const int gpus = device_count(DeviceType::CUDA);
  if (gpus < dist::launch_info().local_size) {
    GTEST_SKIP() << gpus << " CUDA GPUs for " << dist::launch_info().local_size
                 << " ranks on this machine: NCCL needs one GPU a rank";
  }
  const Device gpu = dist::local_device();
  const int n = world().size();
  const auto r = static_cast<double>(world().rank());
  const float rank_sum = static_cast<float>(n * (n + 1) / 2);  // of r + 1 over the ranks
  Tensor t = full({1000}, r + 1, gpu);
  world().all_reduce(t)->wait();
  EXPECT_EQ(min(t.cpu()).item<float>(), rank_sum);
  EXPECT_EQ(max(t.cpu()).item<float>(), rank_sum);
  EXPECT_THAT(world().backend_name(), HasSubstr("nccl"));
  Tensor b = full({17}, r + 10, gpu);
  world().broadcast(b, n - 1)->wait();
  EXPECT_EQ(min(b.cpu()).item<float>(), static_cast<float>(n - 1 + 10));
  Tensor gathered = zeros({n, 3}, gpu);
  world().all_gather(gathered, full({3}, r, gpu))->wait();
  for (int k = 0; k < n; ++k) EXPECT_EQ(gathered.cpu()[k][0].item<float>(), static_cast<float>(k));
  Tensor scattered = zeros({3}, gpu);
  world().reduce_scatter(scattered, full({n, 3}, r + 1, gpu))->wait();
  EXPECT_EQ(max(scattered.cpu()).item<float>(), rank_sum);
  Tensor differs = zeros({world().rank() == 0 ? 4 : 5}, gpu);
  EXPECT_THROW(world().all_reduce(differs), CollectiveMismatchError);  // before NCCL is called, on every rank
}

// Run on its own with STRATA_DIST_STAGE_THROUGH_HOST=1 (tests/dist/CMakeLists.txt): what the opt-in stages.
TEST(MpiStaging, SixteenBitFloatsAreReducedAsF32AndCopiedBackByIsCompleted) {
  ASSERT_NE(std::getenv("STRATA_DIST_STAGE_THROUGH_HOST"), nullptr) << "run with STRATA_DIST_STAGE_THROUGH_HOST=1";
  const int n = world().size(), r = world().rank();
  const double s = n * (n + 1) / 2.0;
  for (const DType dtype : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor base = tensor<double>({1, 2, 3, 4}).to(dtype);
    Tensor sum_t = base * (r + 1), max_t = base * (r + 1), avg_t = base * (r + 1);
    world().all_reduce(sum_t, dist::ReduceOp::Sum)->wait();
    world().all_reduce(max_t, dist::ReduceOp::Max)->wait();
    EXPECT_EQ(sum_t.dtype(), dtype);
    EXPECT_EQ(sum_t.to_vector<double>(), (base * s).to_vector<double>());
    EXPECT_EQ(max_t.to_vector<double>(), (base * n).to_vector<double>());
    // is_completed() is true only once the staged result is back in the tensor, without wait().
    auto work = world().all_reduce(avg_t, dist::ReduceOp::Avg);
    while (!work->is_completed()) std::this_thread::yield();
    EXPECT_EQ(avg_t.to_vector<double>(), (base * (s / n)).to_vector<double>());
    work->wait();
  }
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

TEST(MpiDdp, GradientsAsBucketViewsGiveTheSameBits) {
  dist::DdpOptions views;
  views.gradient_as_bucket_view = true;
  EXPECT_EQ(train_ddp(views), train_ddp({}));
  views.first_bucket_cap_bytes = views.bucket_cap_bytes = 64;
  EXPECT_EQ(train_ddp(views), train_ddp({}));
}

using testing::TwoHeads;

// Note [Parameters that a pass did not use]: head b is used on rank 0 only, and gets the average over the world
// (rank 0's gradient / n) on every rank; head a is used on the other ranks; a parameter no rank used keeps its
// gradient, and SGD with momentum and weight decay leaves it where it was.
TEST(MpiDdp, AParameterUsedOnSomeRanksIsAveragedAndOneNoRankUsedIsUntouched) {
  const int n = world().size(), r = world().rank();
  for (const bool views : {false, true}) {
    SCOPED_TRACE(views ? "gradient_as_bucket_view" : "copies");
    manual_seed(11);
    auto model = std::make_shared<TwoHeads>();
    dist::DdpOptions options;
    options.gradient_as_bucket_view = views;
    options.first_bucket_cap_bytes = options.bucket_cap_bytes = 64;  // one bucket for most parameters
    dist::DistributedDataParallel ddp(model, world(), options);
    manual_seed(12);
    const Tensor x = randn({4, 6});  // the same on every rank
    model->use_b = r == 0;
    model->zero_grad();
    sum(ddp(x)).backward();
    // Rank 0's gradient of b's weight, computed locally: what each rank should hold, divided by n.
    manual_seed(11);
    auto alone = std::make_shared<TwoHeads>();
    alone->use_b = true;
    sum((*alone)(x)).backward();
    const auto expected = (alone->b->weight.grad() / static_cast<double>(n)).to_vector<float>();
    const auto got = model->b->weight.grad().to_vector<float>();
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], expected[i]) << i;
    EXPECT_TRUE(model->a->weight.grad().defined());  // used on ranks 1..n-1, averaged everywhere

    // Now no rank uses b: its gradient stays as it is, and the optimizer leaves b alone.
    model->use_b = false;
    model->zero_grad();
    optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
    const auto b_before = model->b->weight.to_vector<float>();
    for (int step = 0; step < 2; ++step) {
      sgd.zero_grad();
      sum(ddp(x)).backward();
      sgd.step();
    }
    EXPECT_FALSE(model->b->weight.grad().defined());
    EXPECT_EQ(model->b->weight.to_vector<float>(), b_before);
  }
}

// Dropping the wrapper takes its hooks off: backward then gives each rank its own gradient, and a new wrapper
// averages once.
TEST(MpiDdp, DroppingTheWrapperLeavesLocalTrainingAndWrappingAgainAveragesOnce) {
  const int n = world().size(), r = world().rank();
  auto model = mlp();
  const GlobalBatches data = global_batches(1, kBatch);
  const Tensor x = shard(data.x[0], r, n);
  const auto first_grad = [&] {
    model->zero_grad();
    sum((*model)(x)).backward();
    return model->parameters()[0].grad().reshape({-1}).contiguous();
  };
  const auto gathered = [&](const Tensor& g) {
    Tensor all = zeros({n, g.numel()});
    world().all_gather(all, g)->wait();
    return all;
  };
  { dist::DistributedDataParallel ddp(model, world()); }  // rank 0's weights everywhere, then gone
  const Tensor local = first_grad();
  const Tensor locals = gathered(local);
  EXPECT_NE(locals[0].to_vector<float>(), locals[n - 1].to_vector<float>()) << "still averaged after the wrapper died";
  dist::DistributedDataParallel again(model, world());
  const Tensor averaged = first_grad();
  const auto expected = (sum(locals, {0}) / static_cast<double>(n)).to_vector<float>();
  const auto got = averaged.to_vector<float>();
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], expected[i]) << i;
}

// A parameter used only in a no_sync() pass still had a gradient to contribute: the next synchronised pass
// averages it, though that pass did not use it.
TEST(MpiDdp, AGradientAccumulatedUnderNoSyncIsAveragedByAPassThatDidNotUseIt) {
  const int n = world().size(), r = world().rank();
  manual_seed(11);
  auto model = std::make_shared<TwoHeads>();
  dist::DistributedDataParallel ddp(model, world());
  manual_seed(12);
  const Tensor x = randn({4, 6}) * static_cast<double>(r + 1);  // a different batch on each rank
  {
    auto guard = ddp.no_sync();
    model->use_b = true;
    sum(ddp(x)).backward();
  }
  const Tensor local = model->b->weight.grad().reshape({-1}).contiguous();
  Tensor locals = zeros({n, local.numel()});
  world().all_gather(locals, local)->wait();
  model->use_b = false;
  sum(ddp(x)).backward();
  const auto expected = (sum(locals, {0}) / static_cast<double>(n)).to_vector<float>();
  const auto got = model->b->weight.grad().to_vector<float>();
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], expected[i]) << i;
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
  Tensor t = ones({1000}), behind = ones({10});
  auto first = world().all_reduce(t);
  auto second = world().all_reduce(behind);  // queued behind the first, which never finishes
  try {
    first->wait();
    ADD_FAILURE() << "no timeout";
  } catch (const CollectiveTimeoutError& e) {
    std::printf("rank 0 timed out as expected: %s\n", e.what());
    std::fflush(stdout);
    EXPECT_THAT(e.what(), HasSubstr("all_reduce of [1000] f32 (sum) on rank 0 of 2 did not finish within"));
    EXPECT_THAT(e.what(), HasSubstr("the other rank, rank 1, did not complete it"));  // Note [Naming the lost rank]
  }
  EXPECT_THROW(world().barrier(), DistributedError) << "the group must refuse work after a timeout";
  // The second can never finish either: it fails at once rather than after another whole timeout.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT([&] { second->wait(); },
              ::testing::ThrowsMessage<DistributedError>(HasSubstr("all_reduce of [10] f32 (sum) on rank 0 of 2 "
                                                                   "cannot finish: an earlier collective timed out")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

}  // namespace
}  // namespace strata
