// strata/dist's groups for device tensors (device_group.cpp): the plumbing through a fake collective library on the
// CPU, which runs everywhere, and NCCL on a GPU where there is one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "dist/fake_collectives.h"
#include "strata/core/error.h"
#include "strata/dist/agreement.h"
#include "strata/dist/device_collectives.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

using testing::FakeLibrary;
using testing::FakeLog;
using ::testing::HasSubstr;

// Installs a fake library for CPU tensors for the test's duration (the world never sends CPU tensors to it).
class FakeDeviceGroup : public ::testing::Test {
 protected:
  void SetUp() override { dist::register_collective_library(DeviceType::CPU, std::make_shared<FakeLibrary>(log_)); }
  void TearDown() override { dist::register_collective_library(DeviceType::CPU, nullptr); }

  std::shared_ptr<dist::ProcessGroup> make_group() {
    std::string why;
    auto group = dist::make_device_group(*host_, DeviceType::CPU, {}, &why);
    EXPECT_NE(group, nullptr) << why;
    return group;
  }

  std::shared_ptr<FakeLog> log_ = std::make_shared<FakeLog>();
  std::shared_ptr<dist::ProcessGroup> host_ = dist::make_local_group();
};

TEST_F(FakeDeviceGroup, RunsEachCollectiveThroughTheLibraryInOrder) {
  auto group = make_group();
  EXPECT_EQ(group->backend_name(), "fake");
  EXPECT_EQ(group->size(), 1);
  Tensor t = tensor<float>({1, 2, 3});
  group->all_reduce(t, dist::ReduceOp::Max)->wait();
  group->broadcast(t, 0)->wait();
  Tensor gathered = zeros({1, 3});
  group->all_gather(gathered, t)->wait();
  EXPECT_EQ(gathered.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor scattered = zeros({3});
  auto last = group->reduce_scatter(scattered, gathered);
  last->wait();
  EXPECT_TRUE(last->is_completed());
  EXPECT_EQ(scattered.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  std::lock_guard lock(log_->mutex);
  EXPECT_EQ(log_->calls, (std::vector<std::string>{"all_reduce max", "broadcast 0", "all_gather", "reduce_scatter"}));
  // One group id and one communicator for the device, made on its first collective and kept.
  EXPECT_EQ(log_->ids, 1);
  EXPECT_EQ(log_->connects, 1);
  EXPECT_EQ(log_->id, (std::vector<uint8_t>{7, 8, 9}));
  EXPECT_EQ(log_->rank, 0);
  EXPECT_EQ(log_->size, 1);
  EXPECT_EQ(log_->index, 0);
}

TEST_F(FakeDeviceGroup, RefusesWhatTheLibraryCannotMove) {
  auto group = make_group();
  Tensor bf16 = ones({4}, DType::BF16);
  EXPECT_THROW(
      {
        try {
          group->all_reduce(bf16);
        } catch (const DTypeError& e) {
          EXPECT_THAT(e.what(), HasSubstr("fake does not move bf16"));
          throw;
        }
      },
      DTypeError);
  Tensor ints = ones({4}, DType::I64);
  EXPECT_THROW(group->all_reduce(ints, dist::ReduceOp::Avg), DTypeError);
  Tensor strided = ones({4, 4}).transpose(0, 1);
  EXPECT_THROW(group->broadcast(strided, 0), InvalidArgumentError);
  Tensor t = ones({4});
  EXPECT_THROW(group->broadcast(t, 1), InvalidArgumentError);
  Tensor wrong = zeros({2, 4});
  EXPECT_THROW(group->all_gather(wrong, t), ShapeError);
  std::lock_guard lock(log_->mutex);
  EXPECT_TRUE(log_->calls.empty());
}

TEST_F(FakeDeviceGroup, AnErrorTheLibraryReportsLaterFailsTheGroupAndAbortsIt) {
  auto group = make_group();
  Tensor t = ones({4});
  group->all_reduce(t)->wait();
  {
    std::lock_guard lock(log_->mutex);
    log_->async_error = "the peer's connection closed";
  }
  // The watchdog sees the error between jobs; from then on every collective of the group names it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string message;
  while (message.empty() && std::chrono::steady_clock::now() < deadline) {
    try {
      group->all_reduce(t)->wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } catch (const DistributedError& e) {
      message = e.what();
    }
  }
  EXPECT_THAT(message, HasSubstr("fake failed on cpu, rank 0 of 1: the peer's connection closed"));
  std::lock_guard lock(log_->mutex);
  EXPECT_TRUE(log_->aborted);
}

// A host group of two ranks in one process, for a device group to be built on: rank 0's side of each exchange, the
// other rank's made up. It counts the host exchanges a device collective costs and can make the other rank disagree.
class FakeBootstrap final : public dist::ProcessGroup, public dist::detail::AgreementExchange {
 public:
  int agreements = 0;
  int other_exchanges = 0;
  std::vector<std::thread::id> agreement_threads;
  bool other_rank_differs = false;  // rank 1's tensor has one more row

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend_name() const override { return "fake-host"; }
  std::shared_ptr<dist::Work> all_reduce(Tensor&, dist::ReduceOp) override { return other(); }
  std::shared_ptr<dist::Work> broadcast(Tensor&, int) override { return other(); }  // from rank 0: nothing moves
  std::shared_ptr<dist::Work> all_gather(Tensor&, const Tensor&) override { return other(); }
  std::shared_ptr<dist::Work> reduce_scatter(Tensor&, const Tensor&, dist::ReduceOp) override { return other(); }
  std::shared_ptr<dist::Work> barrier() override { return other(); }

  std::shared_ptr<dist::Work> agree(const dist::detail::Descriptor& mine, const std::string&) override {
    ++agreements;
    agreement_threads.push_back(std::this_thread::get_id());
    dist::detail::Descriptor theirs = mine;
    if (other_rank_differs) ++theirs[5];
    std::vector<int64_t> all(mine.begin(), mine.end());
    all.insert(all.end(), theirs.begin(), theirs.end());
    std::exception_ptr error;
    try {
      dist::detail::check_agreement(all.data(), 2);
    } catch (...) {
      error = std::current_exception();
    }
    return std::make_shared<Done>(error);
  }

 private:
  struct Done final : dist::Work {
    explicit Done(std::exception_ptr e) : error(std::move(e)) {}
    void wait() override {
      if (error) std::rethrow_exception(error);
    }
    bool is_completed() override { return true; }
    std::exception_ptr error;
  };
  std::shared_ptr<dist::Work> other() {
    ++other_exchanges;
    return std::make_shared<Done>(nullptr);
  }
};

// Note [A direct path to the device's library]: the library is called on the caller's thread, after one host exchange
// per collective (the descriptor's), and the group id's two broadcasts once.
TEST_F(FakeDeviceGroup, IssuesOnTheCallersThreadAfterOneHostExchangeEach) {
  FakeBootstrap host;
  std::string why;
  auto group = dist::make_device_group(host, DeviceType::CPU, {}, &why);
  ASSERT_NE(group, nullptr) << why;
  EXPECT_EQ(group->size(), 2);
  Tensor t = ones({4});
  Tensor gathered = zeros({2, 4});
  for (int i = 0; i < 3; ++i) group->all_reduce(t)->wait();
  group->broadcast(t, 1)->wait();
  auto last = group->all_gather(gathered, t);
  last->wait();
  EXPECT_TRUE(last->is_completed());
  EXPECT_EQ(host.agreements, 5);
  EXPECT_EQ(host.other_exchanges, 2);  // the group id: its length and its bytes, on the first collective only
  const auto me = std::this_thread::get_id();
  EXPECT_THAT(host.agreement_threads, ::testing::Each(me));
  std::lock_guard lock(log_->mutex);
  EXPECT_EQ(log_->calls.size(), 5U);
  EXPECT_THAT(log_->threads, ::testing::Each(me));
}

TEST_F(FakeDeviceGroup, RanksThatDisagreeGetAnErrorAndTheLibraryIsNeverCalled) {
  FakeBootstrap host;
  std::string why;
  auto group = dist::make_device_group(host, DeviceType::CPU, {}, &why);
  ASSERT_NE(group, nullptr) << why;
  host.other_rank_differs = true;
  Tensor t = ones({4});
  EXPECT_THAT([&] { group->all_reduce(t); }, ::testing::ThrowsMessage<CollectiveMismatchError>(::testing::AllOf(
                                                 HasSubstr("rank 0 called all_reduce of [4] f32 (sum)"),
                                                 HasSubstr("rank 1 called all_reduce of [5] f32 (sum)"))));
  {
    std::lock_guard lock(log_->mutex);
    EXPECT_TRUE(log_->calls.empty());
  }
  host.other_rank_differs = false;  // a disagreement is the caller's error, not the group's: it goes on
  group->all_reduce(t)->wait();
  EXPECT_EQ(host.agreements, 2);
}

// A library call that blocks on the host (a peer that never connects) is timed from before the call: the watchdog
// aborts the communicator within the timeout and one poll, the call returns, and the caller gets the timeout.
TEST_F(FakeDeviceGroup, TheWatchdogAbortsACallThatHangsAndTheGroupRefusesMore) {
  dist::ProcessGroupOptions options;
  options.timeout = std::chrono::milliseconds(300);
  std::string why;
  auto group = dist::make_device_group(*host_, DeviceType::CPU, options, &why);
  ASSERT_NE(group, nullptr) << why;
  Tensor t = ones({4});
  group->all_reduce(t)->wait();
  {
    std::lock_guard lock(log_->mutex);
    log_->hang = true;
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT([&] { group->all_reduce(t); },
              ::testing::ThrowsMessage<CollectiveTimeoutError>(
                  HasSubstr("all_reduce of [4] f32 (sum) on cpu, rank 0 of 1 did not finish within 0.3 s")));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::seconds(5));
  {
    std::lock_guard lock(log_->mutex);
    EXPECT_TRUE(log_->aborted);
    log_->hang = false;
  }
  EXPECT_THAT([&] { group->broadcast(t, 0); },
              ::testing::ThrowsMessage<DistributedError>(
                  HasSubstr("broadcast: the fake group is unusable after an earlier failure: all_reduce of [4]")));
}

TEST(DeviceGroup, SaysWhyItCannotBeMade) {
  auto host = dist::make_local_group();
  std::string why;
  dist::register_collective_library(DeviceType::CPU, nullptr);
  EXPECT_EQ(dist::make_device_group(*host, DeviceType::CPU, {}, &why), nullptr);
  EXPECT_THAT(why, HasSubstr("no collective library is registered for cpu devices"));
  dist::register_collective_library(DeviceType::CPU,
                                    std::make_shared<FakeLibrary>(std::make_shared<FakeLog>(), "libfake.so.1 missing"));
  EXPECT_EQ(dist::make_device_group(*host, DeviceType::CPU, {}, &why), nullptr);
  EXPECT_EQ(why, "libfake.so.1 missing");
  dist::register_collective_library(DeviceType::CPU, nullptr);
}

// NCCL in a world of one, on the first GPU: the collectives give a world of one's results, each ordered after the
// kernel that wrote its input on the caller's stream, and read back after wait().
TEST(NcclGroup, WorldOfOneOnTheGpu) {
  STRATA_SKIP_WITHOUT_CUDA();
  auto host = dist::make_local_group();
  std::string why;
  auto group = dist::make_device_group(*host, DeviceType::CUDA, {}, &why);
  ASSERT_NE(group, nullptr) << why;
  EXPECT_EQ(group->backend_name(), "nccl");
  const Device gpu("cuda:0");
  for (DType dtype : {DType::F32, DType::F16, DType::I64}) {
    Tensor t = arange(0, 256, 1, TensorOptions(dtype).device(gpu)) * 2;  // integers f16 holds exactly
    group->all_reduce(t, dist::ReduceOp::Sum)->wait();
    EXPECT_EQ(sum(t.cpu().to(DType::F64)).item<double>(), 255.0 * 256.0) << dtype;
  }
  Tensor avg = full({1000}, 3.0, gpu);
  group->all_reduce(avg, dist::ReduceOp::Avg)->wait();
  EXPECT_EQ(max(avg.cpu()).item<float>(), 3.0F);
  Tensor b = full({17}, 5.0, gpu);
  group->broadcast(b, 0)->wait();
  EXPECT_EQ(min(b.cpu()).item<float>(), 5.0F);
  Tensor in = arange(0, 12, 1, TensorOptions(DType::F32).device(gpu));
  Tensor gathered = zeros({1, 12}, gpu);
  group->all_gather(gathered, in)->wait();
  EXPECT_EQ(gathered.cpu().flatten().to_vector<float>(), in.cpu().to_vector<float>());
  Tensor scattered = zeros({12}, gpu);
  auto last = group->reduce_scatter(scattered, gathered, dist::ReduceOp::Max);
  last->wait();
  EXPECT_EQ(scattered.cpu().to_vector<float>(), in.cpu().to_vector<float>());
  synchronize(gpu);
  EXPECT_TRUE(last->is_completed());
}

}  // namespace
}  // namespace strata
