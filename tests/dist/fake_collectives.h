#pragma once

// A collective library for CPU tensors that only logs what it is asked (strata/dist/device_collectives.h): the
// device groups' plumbing (group id, agreement, order, errors) tested without a device.

#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strata/core/error.h"
#include "strata/dist/device_collectives.h"

namespace strata::testing {

// What the fake library was asked to do.
struct FakeLog {
  std::mutex mutex;
  int ids = 0;
  int connects = 0;
  std::vector<std::string> calls;
  std::vector<std::thread::id> threads;  // the thread of each call
  std::vector<uint8_t> id;               // as connect() received it
  int rank = -1, size = -1, index = -1;
  std::string async_error;
  bool aborted = false;
  // A call blocks until abort(), then throws, as a library call that waits on the host for a peer that never comes
  // (NCCL's first collective connects to the peers) and that an abort ends.
  bool hang = false;
  std::condition_variable aborted_changed;
};

// On the CPU, every call moves the bytes a world of one would, and is logged; nothing crosses processes.
class FakeCommunicator final : public dist::DeviceCommunicator {
 public:
  explicit FakeCommunicator(std::shared_ptr<FakeLog> log) : log_(std::move(log)) {}
  void all_reduce(const void* send, void* recv, int64_t count, DType dtype, dist::ReduceOp op, NativeStream) override {
    move(send, recv, count, dtype, fmt::format("all_reduce {}", dist::reduce_op_name(op)));
  }
  void broadcast(void* data, int64_t count, DType dtype, int root, NativeStream) override {
    move(data, data, count, dtype, fmt::format("broadcast {}", root));
  }
  void all_gather(const void* send, void* recv, int64_t count, DType dtype, NativeStream) override {
    move(send, recv, count, dtype, "all_gather");
  }
  void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, dist::ReduceOp, NativeStream) override {
    move(send, recv, count, dtype, "reduce_scatter");
  }
  std::string async_error() override {
    std::lock_guard lock(log_->mutex);
    return log_->async_error;
  }
  void abort() noexcept override {
    {
      std::lock_guard lock(log_->mutex);
      log_->aborted = true;
    }
    log_->aborted_changed.notify_all();
  }

 private:
  void move(const void* send, void* recv, int64_t count, DType dtype, std::string what) {
    std::unique_lock lock(log_->mutex);
    log_->calls.push_back(what);
    log_->threads.push_back(std::this_thread::get_id());
    if (log_->hang) {
      log_->aborted_changed.wait(lock, [this] { return log_->aborted; });
      STRATA_THROW(DistributedError, "fake {}: the communicator was aborted", what);
    }
    if (send != recv) std::memcpy(recv, send, static_cast<std::size_t>(count) * dtype_size(dtype));
  }
  std::shared_ptr<FakeLog> log_;
};

class FakeLibrary final : public dist::CollectiveLibrary {
 public:
  explicit FakeLibrary(std::shared_ptr<FakeLog> log, std::string why_unavailable = {})
      : log_(std::move(log)), why_unavailable_(std::move(why_unavailable)) {}
  std::string name() const override { return "fake"; }
  bool available(std::string* why_not) override {
    if (why_not != nullptr) *why_not = why_unavailable_;
    return why_unavailable_.empty();
  }
  bool supports(DType dtype) const override { return dtype != DType::BF16; }
  std::vector<uint8_t> new_group_id() override {
    std::lock_guard lock(log_->mutex);
    ++log_->ids;
    return {7, 8, 9};
  }
  std::unique_ptr<dist::DeviceCommunicator> connect(const std::vector<uint8_t>& id, int rank, int size,
                                                    int index) override {
    std::lock_guard lock(log_->mutex);
    ++log_->connects;
    log_->id = id;
    log_->rank = rank;
    log_->size = size;
    log_->index = index;
    return std::make_unique<FakeCommunicator>(log_);
  }

 private:
  std::shared_ptr<FakeLog> log_;
  std::string why_unavailable_;
};

}  // namespace strata::testing
