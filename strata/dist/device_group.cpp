// Collectives on device tensors through the device's own library (NCCL for CUDA), and the world that sends each
// tensor to the group for its device.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "strata/core/error.h"
#include "strata/dist/agreement.h"
#include "strata/dist/device_collectives.h"
#include "strata/runtime/environment.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"

namespace strata::dist {

namespace {

// Note [Collectives on devices]
// A DeviceGroup runs collectives on device tensors through the device's library (NCCL), over the same ranks as a
// bootstrap group on the host (MPI, or a world of one), as c10d's ProcessGroupNCCL does:
// - The bootstrap carries the library's group identifier, once per device (one communicator per device, cached),
//   and before each collective the agreement check (Note [Checking that ranks agree]): a library such as NCCL
//   hangs, or mixes data, when ranks disagree. That costs one small host all-gather per collective; DDP issues a
//   few per step.
// - One thread of the group issues every library call, in the order the collectives were issued (the order every
//   rank must use), as the MPI backend's thread does; the caller only queues.
// - Each collective runs on a communication stream of its device. It starts after an event recorded on the
//   caller's current stream when the collective was issued, and it records an event when it is done: Work::wait()
//   makes the caller's current stream wait for that event. No host thread waits for the device: the backward pass
//   goes on queueing kernels while the gradients travel.
// - Tensors in flight stay safe from the caching allocator by record-stream (Tensor::record_stream on the
//   communication stream): freed early, their memory is not handed out again before the communication stream has
//   passed the collective. The queued job also holds the tensors until the library call is queued, so that the
//   record-stream event, taken when the memory is freed, comes after the collective on that stream.
// - A watchdog (the same thread, between jobs) polls the events of collectives in flight. One that is not done within
//   the group's timeout, or an error the library reports, aborts the communicator so that the streams drain; the
//   error is then thrown by wait() and by every later collective of the group, naming the op, the rank and the sizes.
class DeviceWork final : public Work {
 public:
  DeviceWork(Device device, std::string what, std::chrono::milliseconds timeout)
      : device_(device), what_(std::move(what)), timeout_(timeout), done_(device) {}

  void wait() override {
    {
      std::unique_lock lock(mutex_);
      if (!queued_cv_.wait_for(lock, timeout_, [this] { return queued_; })) {
        STRATA_THROW(CollectiveTimeoutError,
                     "{} was not started within {} s: another rank may have died, or issued other collectives in "
                     "another order (STRATA_DIST_TIMEOUT sets the timeout in seconds)",
                     what_, std::chrono::duration<double>(timeout_).count());
      }
      if (error_) std::rethrow_exception(error_);
    }
    current_stream(device_).wait(done_);
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }

  bool is_completed() override {
    std::lock_guard lock(mutex_);
    return error_ != nullptr || (queued_ && done_.query());
  }

  const std::string& what() const { return what_; }
  Event& done() { return done_; }

  /// The collective is on the communication stream, followed by done(); or it failed before (error).
  void set_queued(std::exception_ptr error) {
    {
      std::lock_guard lock(mutex_);
      queued_ = true;
      if (error && !error_) error_ = std::move(error);
    }
    queued_cv_.notify_all();
  }

  /// Failed while running on the device (the watchdog).
  void fail(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::move(error);
  }

 private:
  Device device_;
  std::string what_;
  std::chrono::milliseconds timeout_;
  Event done_;
  std::mutex mutex_;
  std::condition_variable queued_cv_;
  bool queued_ = false;
  std::exception_ptr error_;
};

// A device's connection to the other ranks, and the stream its collectives run on.
struct Channel {
  std::unique_ptr<DeviceCommunicator> communicator;
  Stream stream;
};

class DeviceGroup final : public ProcessGroup {
 public:
  DeviceGroup(ProcessGroup& bootstrap, DeviceType type, std::shared_ptr<CollectiveLibrary> library,
              const ProcessGroupOptions& options)
      : bootstrap_(bootstrap), type_(type), library_(std::move(library)), options_(options) {
    thread_ = std::thread([this] { run(); });
  }

  // Note [The MPI world ends at exit] holds here too: the world's groups are never destroyed. A group made by hand
  // stops its thread; a collective still in flight on the device is the caller's to wait for.
  ~DeviceGroup() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  int rank() const override { return bootstrap_.rank(); }
  int size() const override { return bootstrap_.size(); }
  std::string backend_name() const override { return library_->name(); }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op) override {
    check_tensor("all_reduce", tensor);
    detail::check_reducible("all_reduce", tensor, op);
    return enqueue(detail::Kind::AllReduce, tensor, op, 0, {tensor},
                   [tensor, op](DeviceCommunicator& c, NativeStream s) {
                     c.all_reduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), tensor.dtype(), op, s);
                   });
  }

  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override {
    check_tensor("broadcast", tensor);
    STRATA_CHECK(root >= 0 && root < size(), InvalidArgumentError, "broadcast: root {} is not a rank of a world of {}",
                 root, size());
    return enqueue(detail::Kind::Broadcast, tensor, ReduceOp::Sum, root, {tensor},
                   [tensor, root](DeviceCommunicator& c, NativeStream s) {
                     c.broadcast(tensor.data_ptr(), tensor.numel(), tensor.dtype(), root, s);
                   });
  }

  std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) override {
    detail::check_gathered("all_gather", output, input, size());
    check_tensor("all_gather", input);
    check_tensor("all_gather", output);
    return enqueue(detail::Kind::AllGather, input, ReduceOp::Sum, 0, {input, output},
                   [input, output](DeviceCommunicator& c, NativeStream s) {
                     c.all_gather(input.data_ptr(), output.data_ptr(), input.numel(), input.dtype(), s);
                   });
  }

  std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op) override {
    detail::check_gathered("reduce_scatter", input, output, size());
    check_tensor("reduce_scatter", input);
    check_tensor("reduce_scatter", output);
    detail::check_reducible("reduce_scatter", output, op);
    return enqueue(detail::Kind::ReduceScatter, output, op, 0, {input, output},
                   [input, output, op](DeviceCommunicator& c, NativeStream s) {
                     c.reduce_scatter(input.data_ptr(), output.data_ptr(), output.numel(), output.dtype(), op, s);
                   });
  }

  // Nothing of the device to order: the host group's barrier.
  std::shared_ptr<Work> barrier() override { return bootstrap_.barrier(); }

 private:
  using Call = std::function<void(DeviceCommunicator&, NativeStream)>;

  struct Job {
    detail::Descriptor descriptor;
    Device device;
    std::vector<Tensor> tensors;  // held until the call is queued (Note [Collectives on devices])
    Call call;
    std::shared_ptr<Event> ready;  // on the caller's stream when the collective was issued
    std::shared_ptr<DeviceWork> work;
  };

  struct InFlight {
    std::shared_ptr<DeviceWork> work;
    int index;
    std::chrono::steady_clock::time_point since;
  };

  void check_tensor(const char* op, const Tensor& t) const {
    STRATA_CHECK(t.defined(), InvalidArgumentError, "{}: the tensor is undefined", op);
    STRATA_CHECK(t.device().type() == type_, DeviceMismatchError, "{}: this {} group moves {} tensors, not {}", op,
                 library_->name(), device_type_name(type_), t.device());
    STRATA_CHECK(t.is_contiguous(), InvalidArgumentError,
                 "{}: the tensor must be contiguous (call .contiguous() and pass the result)", op);
    STRATA_CHECK(library_->supports(t.dtype()), DTypeError, "{}: {} does not move {} tensors", op, library_->name(),
                 t.dtype());
  }

  std::shared_ptr<Work> enqueue(detail::Kind kind, const Tensor& described, ReduceOp op, int root,
                                std::vector<Tensor> tensors, Call call) {
    throw_if_broken(detail::kind_name(kind));
    const Device device = described.device();
    const detail::Descriptor descriptor = detail::describe(kind, described, op, root);
    auto work = std::make_shared<DeviceWork>(
        device, fmt::format("{} on {}, rank {} of {}", detail::describe_text(descriptor), device, rank(), size()),
        options_.timeout);
    auto ready = std::make_shared<Event>(device);
    ready->record();
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back({descriptor, device, std::move(tensors), std::move(call), std::move(ready), work});
    }
    wake_.notify_one();
    return work;
  }

  void throw_if_broken(const char* op) {
    std::lock_guard lock(mutex_);
    if (!broken_) return;
    try {
      std::rethrow_exception(broken_);
    } catch (const std::exception& e) {
      STRATA_THROW(DistributedError, "{}: the {} group is unusable after an earlier failure: {}", op, library_->name(),
                   e.what());
    }
  }

  // Note [Checking that ranks agree], through the bootstrap group.
  void check_agreement(const detail::Descriptor& mine) {
    if (size() == 1) return;
    const auto n = static_cast<int64_t>(mine.size());
    Tensor in = empty({n}, DType::I64);
    std::copy(mine.begin(), mine.end(), in.data<int64_t>());
    Tensor all = empty({size(), n}, DType::I64);
    bootstrap_.all_gather(all, in)->wait();
    detail::check_agreement(all.data<int64_t>(), size());
  }

  // The device's channel; made on its first collective, which every rank reaches at the same point.
  Channel& channel(Device device) {
    const auto it = channels_.find(device.index());
    if (it != channels_.end()) return it->second;
    std::vector<uint8_t> id;
    if (rank() == 0) id = library_->new_group_id();
    Tensor length = full({1}, static_cast<int64_t>(id.size()), DType::I64);
    bootstrap_.broadcast(length, 0)->wait();
    Tensor bytes = zeros({length.data<int64_t>()[0]}, DType::U8);
    std::copy(id.begin(), id.end(), bytes.data<uint8_t>());
    bootstrap_.broadcast(bytes, 0)->wait();
    id.assign(bytes.data<uint8_t>(), bytes.data<uint8_t>() + bytes.numel());
    Channel made{library_->connect(id, rank(), size(), device.index()), Stream::create(device)};
    return channels_.emplace(device.index(), std::move(made)).first->second;
  }

  void start(Job& job) {
    check_agreement(job.descriptor);
    Channel& c = channel(job.device);
    c.stream.wait(*job.ready);
    for (const Tensor& t : job.tensors) t.record_stream(c.stream);
    job.call(*c.communicator, c.stream.native());
    job.work->done().record(c.stream);
    in_flight_.push_back({job.work, job.device.index(), std::chrono::steady_clock::now()});
  }

  // The watchdog's round over the collectives in flight (Note [Collectives on devices]).
  void watch() {
    for (auto& [index, c] : channels_) {
      std::string error = c.communicator->async_error();
      if (!error.empty()) {
        fail_all(std::make_exception_ptr(DistributedError(fmt::format(
            "{} failed on {}, rank {} of {}: {}", library_->name(), Device(type_, index), rank(), size(), error))));
        return;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(in_flight_, [](const InFlight& f) { return f.work->is_completed(); });
    for (const InFlight& f : in_flight_) {
      if (now - f.since > options_.timeout) {
        fail_all(
            std::make_exception_ptr(CollectiveTimeoutError(detail::timeout_message(f.work->what(), options_.timeout))));
        return;
      }
    }
  }

  // Aborts every communicator, so that what is queued on the streams drains, and fails the group.
  void fail_all(std::exception_ptr error) {
    for (auto& [index, c] : channels_) c.communicator->abort();
    for (InFlight& f : in_flight_) f.work->fail(error);
    in_flight_.clear();
    std::lock_guard lock(mutex_);
    if (!broken_) broken_ = error;
  }

  void run() {
    constexpr auto kWatchEvery = std::chrono::milliseconds(100);
    while (true) {
      std::optional<Job> job;
      {
        std::unique_lock lock(mutex_);
        const auto has_job = [this] { return stopping_ || !jobs_.empty(); };
        if (in_flight_.empty()) {
          wake_.wait(lock, has_job);
        } else {
          wake_.wait_for(lock, kWatchEvery, has_job);
        }
        if (!jobs_.empty()) {
          job.emplace(std::move(jobs_.front()));
          jobs_.pop_front();
        } else if (stopping_) {
          break;
        }
      }
      if (job) {
        std::exception_ptr error;
        {
          std::lock_guard lock(mutex_);
          error = broken_;
        }
        if (!error) {
          try {
            start(*job);
          } catch (...) {
            error = std::current_exception();
          }
        }
        job->tensors.clear();
        job->work->set_queued(error);
      }
      watch();
    }
  }

  ProcessGroup& bootstrap_;
  DeviceType type_;
  std::shared_ptr<CollectiveLibrary> library_;
  ProcessGroupOptions options_;
  std::map<int, Channel> channels_;  // by device index; the group's thread alone uses it
  std::vector<InFlight> in_flight_;  // the group's thread alone
  std::mutex mutex_;                 // guards jobs_, stopping_ and broken_
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::exception_ptr broken_;
  std::thread thread_;
};

// STRATA_DIST_STAGE_DEVICE_TENSORS=1: device tensors go through the host group, staged in host memory.
bool staging_forced() {
  constexpr const char* kName = "STRATA_DIST_STAGE_DEVICE_TENSORS";
  const std::optional<std::string> text = environment_value(kName);  // Note [Strata's environment variables]
  return text && environment_switch(kName, *text);
}

// Note [The world's groups]
// The world sends each collective to the group for its tensors' device: CPU tensors (and barriers) to the host
// group, MPI; tensors of a device type whose plugin registered a collective library to a DeviceGroup, made on the
// first such collective (every rank reaches it at the same point). Without a library, or with
// STRATA_DIST_STAGE_DEVICE_TENSORS=1, device tensors go to the host group, which stages them in host memory (counted
// copies) when the options allow it and refuses them otherwise (Note [Nothing staged behind the caller's back]). A
// library that is registered but cannot be used is an error naming why, not a silent fall back to staging: ranks that
// chose differently would wait on different collectives.
class WorldGroup final : public ProcessGroup {
 public:
  WorldGroup(std::shared_ptr<ProcessGroup> host, const ProcessGroupOptions& options)
      : host_(std::move(host)), options_(options), stage_device_tensors_(staging_forced()) {}

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string backend_name() const override {
    std::lock_guard lock(mutex_);
    std::string name = host_->backend_name();
    for (const auto& [type, group] : device_groups_) name += fmt::format("+{}", group->backend_name());
    return name;
  }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op) override {
    return group_for(tensor).all_reduce(tensor, op);
  }
  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override {
    return group_for(tensor).broadcast(tensor, root);
  }
  std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) override {
    return group_for(input).all_gather(output, input);
  }
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op) override {
    return group_for(output).reduce_scatter(output, input, op);
  }
  std::shared_ptr<Work> barrier() override { return host_->barrier(); }

 private:
  ProcessGroup& group_for(const Tensor& t) {
    if (!t.defined() || t.device().is_cpu() || stage_device_tensors_) return *host_;
    const DeviceType type = t.device().type();
    if (collective_library(type) == nullptr) return *host_;
    std::lock_guard lock(mutex_);
    auto& group = device_groups_[type];
    if (!group) {
      std::string why;
      group = make_device_group(*host_, type, options_, &why);
      if (!group) {
        device_groups_.erase(type);
        STRATA_THROW(DistributedError,
                     "collectives on {} tensors need {}, which cannot be used: {} (STRATA_DIST_STAGE_DEVICE_TENSORS=1 "
                     "stages them through {} instead, on every rank)",
                     device_type_name(type), collective_library(type)->name(), why, host_->backend_name());
      }
    }
    return *group;
  }

  std::shared_ptr<ProcessGroup> host_;
  ProcessGroupOptions options_;
  bool stage_device_tensors_;  // STRATA_DIST_STAGE_DEVICE_TENSORS=1 when the world was made
  mutable std::mutex mutex_;   // guards device_groups_
  std::map<DeviceType, std::shared_ptr<ProcessGroup>> device_groups_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_device_group(ProcessGroup& bootstrap, DeviceType type,
                                                const ProcessGroupOptions& options, std::string* why_not) {
  (void)find_backend(type);  // loads the device's plugin, which registers its library
  auto library = collective_library(type);
  std::string why;
  if (library == nullptr) {
    why = fmt::format("no collective library is registered for {} devices", device_type_name(type));
  } else if (library->available(&why)) {
    return std::make_shared<DeviceGroup>(bootstrap, type, std::move(library), options);
  }
  if (why_not != nullptr) *why_not = why;
  return nullptr;
}

std::shared_ptr<ProcessGroup> detail::make_world_group(std::shared_ptr<ProcessGroup> host,
                                                       const ProcessGroupOptions& options) {
  return std::make_shared<WorldGroup>(std::move(host), options);
}

}  // namespace strata::dist
