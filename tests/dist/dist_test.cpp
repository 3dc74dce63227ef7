// strata/dist in one process: the world of one, the launcher's environment, the sampler's shards, and
// DistributedDataParallel's buckets. The collectives between processes are tested under mpiexec (mpi_test.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "strata/autograd/grad_mode.h"
#include "strata/autograd/hooks.h"
#include "strata/autograd/node.h"
#include "strata/core/error.h"
#include "strata/data/dataset.h"
#include "strata/data/distributed_sampler.h"
#include "strata/dist/ddp.h"
#include "strata/dist/process_group.h"
#include "strata/nn/layers.h"
#include "strata/optim/sgd.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "dist/two_heads.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

TEST(LocalGroup, CollectivesAreIdentitiesInAWorldOfOne) {
  auto group = dist::make_local_group();
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1);
  Tensor t = tensor<float>({1, 2, 3});
  auto work = group->all_reduce(t, dist::ReduceOp::Avg);
  EXPECT_TRUE(work->is_completed());
  work->wait();
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor gathered = zeros({1, 3});
  group->all_gather(gathered, t)->wait();
  EXPECT_EQ(gathered.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor scattered = zeros({3});
  group->reduce_scatter(scattered, gathered)->wait();
  EXPECT_EQ(scattered.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_THROW(group->broadcast(t, 1), InvalidArgumentError);
  EXPECT_THROW(group->all_reduce(t = tensor<int64_t>({1}), dist::ReduceOp::Avg), DTypeError);
  Tensor wrong = zeros({2, 3});
  EXPECT_THROW(group->all_gather(wrong, tensor<float>({1, 2, 3})), ShapeError);
}

// Sets environment variables for one test and restores them.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value) {
        setenv(name, value, 1);
      } else {
        unsetenv(name);
      }
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) {
      if (old) {
        setenv(name.c_str(), old->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(LaunchInfo, ReadsOpenMpiThenTorchrunVariables) {
  {
    const ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", "4"},
                        {"OMPI_COMM_WORLD_RANK", "2"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                        {"WORLD_SIZE", "8"}};
    const auto info = dist::launch_info();
    EXPECT_EQ(info.launcher, "mpirun");
    EXPECT_EQ(info.size, 4);
    EXPECT_EQ(info.rank, 2);
    EXPECT_EQ(info.local_rank, 0);
  }
  {
    const ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", nullptr}, {"WORLD_SIZE", "3"}, {"RANK", "1"}, {"LOCAL_RANK", "1"}};
    const auto info = dist::launch_info();
    EXPECT_EQ(info.launcher, "torchrun");
    EXPECT_EQ(info.size, 3);
    EXPECT_EQ(info.rank, 1);
    EXPECT_EQ(info.local_rank, 1);
  }
  {
    const ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", nullptr}, {"WORLD_SIZE", nullptr}};
    const auto info = dist::launch_info();
    EXPECT_EQ(info.launcher, "");
    EXPECT_EQ(info.size, 1);
  }
}

TEST(LaunchInfo, MalformedValuesNameTheVariable) {
  {
    const ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", "two"}};
    EXPECT_THAT([] { dist::launch_info(); },
                ::testing::ThrowsMessage<InvalidArgumentError>(HasSubstr("OMPI_COMM_WORLD_SIZE='two'")));
  }
  {
    const ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", nullptr}, {"WORLD_SIZE", "2"}, {"RANK", "5"}};
    EXPECT_THAT([] { dist::launch_info(); },
                ::testing::ThrowsMessage<InvalidArgumentError>(HasSubstr("rank 5 in a world of 2")));
  }
}

TEST(DistributedSampler, ShardsAreDisjointAndCoverTheEpoch) {
  for (const int64_t n : {0, 1, 9, 10, 11}) {
    for (const int world : {1, 2, 3}) {
      SCOPED_TRACE(fmt::format("{} examples, {} ranks", n, world));
      std::multiset<int64_t> seen;
      for (int rank = 0; rank < world; ++rank) {
        data::DistributedSampler sampler(n, world, rank, /*shuffle=*/true, /*seed=*/5);
        sampler.set_epoch(3);
        const auto mine = sampler.indices();
        EXPECT_EQ(static_cast<int64_t>(mine.size()), sampler.size());
        seen.insert(mine.begin(), mine.end());
      }
      // Padded to a multiple of the world with the order's own beginning: every index at least once, and the first
      // (padded - n) of the order once more each (several times over when the dataset is smaller than the world).
      const int64_t padded = (n + world - 1) / world * world;
      EXPECT_EQ(static_cast<int64_t>(seen.size()), padded);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_GE(seen.count(i), 1u) << i;
        EXPECT_LE(static_cast<int64_t>(seen.count(i)), 1 + (padded - n + n - 1) / n) << i;
      }
    }
  }
}

TEST(DistributedSampler, SameOrderOnEveryRankNewOrderEachEpochAndDropLast) {
  data::DistributedSampler a(10, 2, 0, true, 7), b(10, 2, 1, true, 7);
  const auto a0 = a.indices(), b0 = b.indices();
  a.set_epoch(1);
  EXPECT_NE(a.indices(), a0);
  data::DistributedSampler again(10, 2, 0, true, 7);
  EXPECT_EQ(again.indices(), a0);  // the order depends on (seed, epoch) only
  std::set<int64_t> both(a0.begin(), a0.end());
  both.insert(b0.begin(), b0.end());
  EXPECT_EQ(both.size(), 10u);
  data::DistributedSampler dropping(11, 3, 2, false, 0, /*drop_last=*/true);
  EXPECT_EQ(dropping.indices(), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_THROW(data::DistributedSampler(10, 2, 2), InvalidArgumentError);
  EXPECT_THROW(data::DistributedSampler(-1, 1, 0), InvalidArgumentError);
}

TEST(Subset, GivesTheExamplesAtItsIndicesInOrder) {
  auto base = std::make_shared<data::TensorDataset>(arange(0, 10, 1, DType::F32).reshape({10, 1}),
                                                    arange(100, 110, 1, DType::I64));
  const data::Subset shard(base, {7, 2, 2, 9});
  EXPECT_EQ(shard.size(), 4);
  EXPECT_EQ(shard.get(0).target.item<int64_t>(), 107);
  const data::Example batch = shard.get_batch(tensor<int64_t>({3, 1, 0}));
  EXPECT_EQ(batch.target.to_vector<int64_t>(), (std::vector<int64_t>{109, 102, 107}));
  EXPECT_EQ(batch.data.reshape({-1}).to_vector<float>(), (std::vector<float>{9, 2, 7}));
  EXPECT_THROW(data::Subset(base, {10}), IndexError);
  EXPECT_THROW(shard.get_batch(tensor<int64_t>({4})), IndexError);
  EXPECT_THROW(data::Subset(nullptr, {}), InvalidArgumentError);
}

TEST(PostAccumulateHooks, RunAfterAccumulationWithTheGradientAndCallbacksAtTheEnd) {
  Tensor w = tensor<float>({1, 2});
  w.requires_grad_();
  std::vector<std::string> events;
  w.register_post_accumulate_grad_hook([&](const Tensor& grad) {
    events.push_back(fmt::format("hook {}", grad.to_vector<float>()[0]));
    autograd::queue_callback([&] { events.push_back("end"); });
  });
  sum(w * 3.0).backward();
  EXPECT_EQ(events, (std::vector<std::string>{"hook 3", "end"}));
  sum(w * 2.0).backward();  // accumulates: the hook sees the sum
  EXPECT_EQ(events.back(), "end");
  EXPECT_EQ(events[2], "hook 5");
  EXPECT_THROW(autograd::queue_callback([] {}), InvalidArgumentError);
  Tensor not_leaf = w * 2.0;
  EXPECT_THROW(not_leaf.register_post_accumulate_grad_hook([](const Tensor&) {}), InvalidArgumentError);
}

std::shared_ptr<nn::Sequential> small_mlp() {
  manual_seed(3);
  return std::make_shared<nn::Sequential>(nn::Linear(6, 16), nn::ReLU(), nn::Linear(16, 16), nn::ReLU(),
                                          nn::Linear(16, 4));
}

TEST(DistributedDataParallel, BucketsGoInReverseOrderWithASmallFirstBucket) {
  auto group = dist::make_local_group();
  auto model = small_mlp();
  dist::DdpOptions options;
  options.first_bucket_cap_bytes = 16 * 4 * 4 + 4 * 4;  // the last layer's weight and bias
  options.bucket_cap_bytes = 16 * 16 * 4;
  dist::DistributedDataParallel ddp(model, *group, options);
  // Parameters: 0 w1 [16,6], 1 b1, 2 w2 [16,16], 3 b2, 4 w3 [4,16], 5 b3.
  EXPECT_EQ(ddp.bucket_layout(), (std::vector<std::vector<std::size_t>>{{5, 4}, {3}, {2}, {1, 0}}));
}

// In a world of one the average is the gradient itself: DDP changes nothing, with any bucket size, and with
// no_sync for accumulation.
TEST(DistributedDataParallel, InAWorldOfOneTheGradientsAreUnchanged) {
  auto group = dist::make_local_group();
  manual_seed(9);
  const Tensor x = randn({8, 6});
  const auto gradients = [&](std::optional<dist::DdpOptions> options) {
    auto model = small_mlp();
    std::optional<dist::DistributedDataParallel> ddp;
    if (options) ddp.emplace(model, *group, *options);
    sum((*model)(x)).backward();
    std::vector<std::vector<float>> out;
    for (const Tensor& p : model->parameters()) out.push_back(p.grad().to_vector<float>());
    return out;
  };
  dist::DdpOptions tiny;
  tiny.bucket_cap_bytes = tiny.first_bucket_cap_bytes = 4;
  const auto plain = gradients(std::nullopt);
  EXPECT_EQ(gradients(dist::DdpOptions{}), plain);
  EXPECT_EQ(gradients(tiny), plain);
}

TEST(PostAccumulateHooks, ARemovedHookRunsNoMoreAndOthersStay) {
  Tensor w = tensor<float>({1, 2});
  w.requires_grad_();
  int kept = 0, removed = 0;
  w.register_post_accumulate_grad_hook([&](const Tensor&) { ++kept; });
  auto handle = autograd::register_post_accumulate_grad_hook(w, [&](const Tensor&) { ++removed; });
  EXPECT_TRUE(handle.active());
  sum(w * 2.0).backward();
  EXPECT_EQ(kept, 1);
  EXPECT_EQ(removed, 1);
  handle.remove();
  EXPECT_FALSE(handle.active());
  handle.remove();  // again: nothing
  sum(w * 2.0).backward();
  EXPECT_EQ(kept, 2);
  EXPECT_EQ(removed, 1);
  EXPECT_EQ(w.autograd_meta()->post_accumulate_hooks.size(), 1u);  // taken off, not only turned off
  // After the tensor is gone, remove() has nothing to do.
  autograd::RemovableHandle orphan;
  {
    Tensor v = ones({2});
    v.requires_grad_();
    orphan = autograd::register_post_accumulate_grad_hook(v, [](const Tensor&) {});
  }
  orphan.remove();
  EXPECT_THROW(autograd::register_post_accumulate_grad_hook(w * 2.0, [](const Tensor&) {}), InvalidArgumentError);
}

using testing::TwoHeads;

TEST(DistributedDataParallel, AParameterNoRankUsedKeepsItsGradientUntouched) {
  auto group = dist::make_local_group();
  manual_seed(4);
  auto model = std::make_shared<TwoHeads>();
  dist::DistributedDataParallel ddp(model, *group);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
  const Tensor x = randn({4, 6});
  const std::vector<float> b_weight = model->b->weight.to_vector<float>();
  for (int step = 0; step < 2; ++step) {
    sgd.zero_grad();
    sum(ddp(x)).backward();
    sgd.step();
  }
  EXPECT_FALSE(model->b->weight.grad().defined()) << "an unused parameter got a gradient";
  EXPECT_EQ(model->b->weight.to_vector<float>(), b_weight) << "momentum or weight decay moved an unused parameter";
  EXPECT_TRUE(model->a->weight.grad().defined());
  // A gradient it already had stays as it was, bit for bit.
  model->b->weight.set_grad(full(model->b->weight.shape(), 0.25f));
  sum(ddp(x)).backward();
  EXPECT_EQ(model->b->weight.grad().to_vector<float>(), std::vector<float>(24, 0.25f));
}

TEST(DistributedDataParallel, IsCallableAndRunsTheModule) {
  auto group = dist::make_local_group();
  auto model = small_mlp();
  dist::DistributedDataParallel ddp(model, *group);
  manual_seed(5);
  const Tensor x = randn({3, 6});
  EXPECT_EQ(ddp(x).to_vector<float>(), (*model)(x).to_vector<float>());
  EXPECT_EQ(ddp.forward(x).to_vector<float>(), (*model)(x).to_vector<float>());
  // A module that is not a layer of one input cannot be called through the wrapper.
  auto holder = std::make_shared<nn::Module>("Holder");
  holder->register_module("inner", small_mlp());
  dist::DistributedDataParallel plain(holder, *group);
  EXPECT_THAT([&] { plain(x); }, ::testing::ThrowsMessage<InvalidArgumentError>(HasSubstr("not an nn::Layer")));
}

// Dropping the wrapper takes its hooks off: the module trains alone again (its hooks would otherwise call into a
// destroyed object), and a second wrapper reduces once, not twice.
TEST(DistributedDataParallel, DroppingTheWrapperRemovesItsHooksAndTheModuleCanBeWrappedAgain) {
  auto group = dist::make_local_group();
  manual_seed(9);
  const Tensor x = randn({8, 6});
  auto model = small_mlp();
  const auto hooks = [&] {
    std::size_t n = 0;
    for (const Tensor& p : model->parameters()) n += p.autograd_meta()->post_accumulate_hooks.size();
    return n;
  };
  const auto grads = [&] {
    model->zero_grad();
    sum((*model)(x)).backward();
    std::vector<std::vector<float>> out;
    for (const Tensor& p : model->parameters()) out.push_back(p.grad().to_vector<float>());
    return out;
  };
  const auto plain = grads();
  {
    dist::DistributedDataParallel ddp(model, *group);
    EXPECT_EQ(hooks(), model->parameters().size());
    EXPECT_EQ(grads(), plain);
  }
  EXPECT_EQ(hooks(), 0u);
  EXPECT_EQ(grads(), plain);
  dist::DistributedDataParallel again(model, *group);
  EXPECT_EQ(hooks(), model->parameters().size());
  EXPECT_EQ(grads(), plain);
}

TEST(DistributedDataParallel, GradientsAsBucketViewsAreTheSameValuesWithoutCopies) {
  auto group = dist::make_local_group();
  manual_seed(9);
  const Tensor x = randn({8, 6});
  auto reference = small_mlp();
  auto model = small_mlp();
  dist::DdpOptions options;
  options.gradient_as_bucket_view = true;
  options.first_bucket_cap_bytes = options.bucket_cap_bytes = 16 * 16 * 4;
  dist::DistributedDataParallel ddp(model, *group, options);
  for (int step = 0; step < 3; ++step) {
    reference->zero_grad(/*set_to_none=*/step == 0);
    model->zero_grad(/*set_to_none=*/step == 0);
    sum((*reference)(x)).backward();
    sum(ddp(x)).backward();
    const auto params = model->parameters(), expected = reference->parameters();
    for (std::size_t p = 0; p < params.size(); ++p) {
      EXPECT_EQ(params[p].grad().to_vector<float>(), expected[p].grad().to_vector<float>()) << p;
    }
  }
  // Each gradient is a view into its bucket: the parameters of one bucket have adjacent gradients, in bucket order.
  for (const auto& bucket : ddp.bucket_layout()) {
    const auto params = model->parameters();
    for (std::size_t i = 1; i < bucket.size(); ++i) {
      const Tensor& before = params[bucket[i - 1]].grad();
      EXPECT_EQ(static_cast<const char*>(params[bucket[i]].grad().data_ptr()),
                static_cast<const char*>(before.data_ptr()) + before.numel() * before.element_size());
    }
  }
  // zero_grad(set_to_none=false) and backward then work in place: the same memory step after step.
  const void* first = model->parameters()[0].grad().data_ptr();
  model->zero_grad(false);
  sum(ddp(x)).backward();
  EXPECT_EQ(model->parameters()[0].grad().data_ptr(), first);
}

TEST(DistInit, TheWorldIsBuiltOnceWithOneSetOfOptions) {
  dist::ProcessGroup& w = dist::init();
  EXPECT_EQ(&dist::init(), &w);
  EXPECT_EQ(&dist::world(), &w);
  dist::ProcessGroupOptions other;
  other.timeout = std::chrono::milliseconds(1234);
  EXPECT_THAT([&] { dist::init(other); },
              ::testing::ThrowsMessage<InvalidArgumentError>(HasSubstr("cannot be built again")));
}

}  // namespace
}  // namespace strata
