// Collectives on device tensors through the device's own library (NCCL for CUDA), and the world that sends each
// tensor to the group for its device.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
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
//   hangs, or mixes data, when ranks disagree. That is one small host exchange per collective, of the descriptor
//   alone (detail::AgreementExchange: the MPI world's thread runs it as a job of its own, so it is not itself
//   checked first); DDP issues a few per step.
// - The caller's thread issues each library call, right after the agreement (Note [A direct path to the device's
//   library]). Collectives issued from several threads at once are issued one at a time (issue_mutex_), each with
//   its agreement, so that every rank sees them in one order.
// - Each collective runs on a communication stream of its device. It starts after an event recorded on the
//   caller's current stream when the collective was issued, and it records an event when it is done: Work::wait()
//   makes the caller's current stream wait for that event. No host thread waits for the device: the backward pass
//   goes on queueing kernels while the gradients travel.
// - Tensors in flight stay safe from the caching allocator by record-stream (Tensor::record_stream on the
//   communication stream): freed early, their memory is not handed out again before the communication stream has
//   passed the collective.
// - A watchdog thread polls the collectives in flight every 100 ms, as ProcessGroupNCCL's does: the event of each
//   (done, or not yet), and the library's asynchronous error (ncclCommGetAsyncError). A collective not done within
//   the group's timeout, or an error the library reports, aborts every communicator of the group so that the
//   streams drain; the error is then thrown by wait() and by every later collective of the group, naming the op,
//   the rank and the sizes. A collective counts as in flight from before its library call: a call that blocks on the
//   host (NCCL connects to its peers lazily, in the first collective, and waits for them there) is timed too, and
//   the abort ends it.
//
// Note [A direct path to the device's library]
// A collective on a device tensor used to be queued for a thread of the group, which checked the agreement through
// an all_gather of the bootstrap group (queued in turn for the MPI thread, which first checked the agreement of that
// all_gather: two host exchanges on two threads) and then issued the library call. Queueing an NCCL call costs a few
// microseconds and does not wait for the data; a thread to issue it only added two hand-offs. So the caller issues it,
// and the agreement is one exchange of its descriptor (the MPI thread still runs it: Note [One thread owns MPI]). The
// caller waits for that exchange: the library call must not be issued before the ranks are known to agree. The price:
// a rank that reaches a collective first (DDP's bucket, during backward) waits there on the host until the others
// reach it, where the group's thread let it go on queueing kernels; ranks in step lose little (c10d, which checks
// nothing by default, does not wait at all). What remains on a thread of the group is the watchdog, which never
// issues a collective.
class DeviceWork final : public Work {
 public:
  DeviceWork(Device device, std::string what) : device_(device), what_(std::move(what)), done_(device) {}

  void wait() override {
    rethrow_if_failed();
    current_stream(device_).wait(done_);
  }

  bool is_completed() override {
    std::lock_guard lock(mutex_);
    return error_ != nullptr || (queued_ && done_.query());
  }

  const std::string& what() const { return what_; }
  Event& done() { return done_; }

  /// The collective is on the communication stream, followed by done().
  void set_queued() {
    std::lock_guard lock(mutex_);
    queued_ = true;
  }
  bool queued() {
    std::lock_guard lock(mutex_);
    return queued_;
  }

  /// Failed while running on the device, or while its call was issued (the watchdog).
  void fail(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::move(error);
  }

  void rethrow_if_failed() {
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  Device device_;
  std::string what_;
  Event done_;
  std::mutex mutex_;
  bool queued_ = false;
  std::exception_ptr error_;
};

// A device's connection to the other ranks, and the stream its collectives run on.
struct Channel {
  std::unique_ptr<DeviceCommunicator> communicator;
  Stream stream;
};

// The bootstrap's one-exchange agreement (the world's: its host group's), or nullptr.
detail::AgreementExchange* agreement_exchange(ProcessGroup& bootstrap);

class DeviceGroup final : public ProcessGroup {
 public:
  DeviceGroup(ProcessGroup& bootstrap, DeviceType type, std::shared_ptr<CollectiveLibrary> library,
              const ProcessGroupOptions& options)
      : bootstrap_(bootstrap),
        exchange_(agreement_exchange(bootstrap)),
        type_(type),
        library_(std::move(library)),
        options_(options) {
    watchdog_ = std::thread([this] { watchdog(); });
  }

  // Note [The MPI world ends at exit] holds here too: the world's groups are never destroyed. A group made by hand
  // stops its watchdog; a collective still in flight on the device is the caller's to wait for.
  ~DeviceGroup() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
  }

  int rank() const override { return bootstrap_.rank(); }
  int size() const override { return bootstrap_.size(); }
  std::string backend_name() const override { return library_->name(); }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op) override {
    check_tensor("all_reduce", tensor);
    detail::check_reducible("all_reduce", tensor, op);
    return issue(detail::Kind::AllReduce, tensor, op, 0, {tensor}, [&](DeviceCommunicator& c, NativeStream s) {
      c.all_reduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), tensor.dtype(), op, s);
    });
  }

  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override {
    check_tensor("broadcast", tensor);
    STRATA_CHECK(root >= 0 && root < size(), InvalidArgumentError, "broadcast: root {} is not a rank of a world of {}",
                 root, size());
    return issue(detail::Kind::Broadcast, tensor, ReduceOp::Sum, root, {tensor},
                 [&](DeviceCommunicator& c, NativeStream s) {
                   c.broadcast(tensor.data_ptr(), tensor.numel(), tensor.dtype(), root, s);
                 });
  }

  std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) override {
    detail::check_gathered("all_gather", output, input, size());
    check_tensor("all_gather", input);
    check_tensor("all_gather", output);
    return issue(detail::Kind::AllGather, input, ReduceOp::Sum, 0, {input, output},
                 [&](DeviceCommunicator& c, NativeStream s) {
                   c.all_gather(input.data_ptr(), output.data_ptr(), input.numel(), input.dtype(), s);
                 });
  }

  std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op) override {
    detail::check_gathered("reduce_scatter", input, output, size());
    check_tensor("reduce_scatter", input);
    check_tensor("reduce_scatter", output);
    detail::check_reducible("reduce_scatter", output, op);
    return issue(detail::Kind::ReduceScatter, output, op, 0, {input, output},
                 [&](DeviceCommunicator& c, NativeStream s) {
                   c.reduce_scatter(input.data_ptr(), output.data_ptr(), output.numel(), output.dtype(), op, s);
                 });
  }

  // Nothing of the device to order: the host group's barrier.
  std::shared_ptr<Work> barrier() override { return bootstrap_.barrier(); }

 private:
  using Call = std::function<void(DeviceCommunicator&, NativeStream)>;

  struct InFlight {
    std::shared_ptr<DeviceWork> work;
    std::chrono::steady_clock::time_point since;  // before its library call (Note [Collectives on devices])
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

  // On the caller's thread (Note [A direct path to the device's library]): the agreement, the device's channel,
  // then the library call on the communication stream, behind the caller's stream.
  std::shared_ptr<Work> issue(detail::Kind kind, const Tensor& described, ReduceOp op, int root,
                              const std::vector<Tensor>& tensors, const Call& call) {
    const char* name = detail::kind_name(kind);
    throw_if_broken(name);
    const Device device = described.device();
    const detail::Descriptor descriptor = detail::describe(kind, described, op, root);
    auto work = std::make_shared<DeviceWork>(
        device, fmt::format("{} on {}, rank {} of {}", detail::describe_text(descriptor), device, rank(), size()));
    Event ready(device);
    ready.record();  // on the caller's current stream
    std::lock_guard issuing(issue_mutex_);
    check_agreement(descriptor, device);
    Channel& c = channel(device);
    throw_if_broken(name);
    watch_over(work);
    try {
      c.stream.wait(ready);
      for (const Tensor& t : tensors) t.record_stream(c.stream);
      call(*c.communicator, c.stream.native());
      work->done().record(c.stream);
    } catch (...) {
      // An abort by the watchdog ends a call that hung: its reason is the error to give, not the abort's.
      work->fail(std::current_exception());
      forget(work);
      work->rethrow_if_failed();
    }
    work->set_queued();
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

  // Note [Checking that ranks agree], through the bootstrap group, in one host exchange where it offers one.
  void check_agreement(const detail::Descriptor& mine, Device device) {
    if (size() == 1) return;
    if (exchange_ != nullptr) {
      exchange_->agree(mine, fmt::format("on {}", device))->wait();
      return;
    }
    const auto n = static_cast<int64_t>(mine.size());
    Tensor in = empty({n}, DType::I64);
    std::copy(mine.begin(), mine.end(), in.data<int64_t>());
    Tensor all = empty({size(), n}, DType::I64);
    bootstrap_.all_gather(all, in)->wait();
    detail::check_agreement(all.data<int64_t>(), size());
  }

  // The device's channel; made on its first collective, which every rank reaches at the same point. Under
  // issue_mutex_; mutex_ only guards the map, which the watchdog reads.
  Channel& channel(Device device) {
    {
      std::lock_guard lock(mutex_);
      const auto it = channels_.find(device.index());
      if (it != channels_.end()) return it->second;
    }
    std::vector<uint8_t> id;
    if (rank() == 0) id = library_->new_group_id();
    Tensor length = full({1}, static_cast<int64_t>(id.size()), DType::I64);
    bootstrap_.broadcast(length, 0)->wait();
    Tensor bytes = zeros({length.data<int64_t>()[0]}, DType::U8);
    std::copy(id.begin(), id.end(), bytes.data<uint8_t>());
    bootstrap_.broadcast(bytes, 0)->wait();
    id.assign(bytes.data<uint8_t>(), bytes.data<uint8_t>() + bytes.numel());
    Channel made{library_->connect(id, rank(), size(), device.index()), Stream::create(device)};
    std::lock_guard lock(mutex_);
    return channels_.emplace(device.index(), std::move(made)).first->second;
  }

  void watch_over(const std::shared_ptr<DeviceWork>& work) {
    bool was_idle = false;
    {
      std::lock_guard lock(mutex_);
      was_idle = in_flight_.empty();
      in_flight_.push_back({work, std::chrono::steady_clock::now()});
    }
    if (was_idle) wake_.notify_one();  // otherwise it polls anyway; a wake-up per collective costs the caller
  }

  void forget(const std::shared_ptr<DeviceWork>& work) {
    std::lock_guard lock(mutex_);
    std::erase_if(in_flight_, [&](const InFlight& f) { return f.work == work; });
  }

  // The watchdog's round over the collectives in flight (Note [Collectives on devices]), under mutex_. Never a
  // library call that can block: the asynchronous error, the events, and an abort.
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
    std::erase_if(in_flight_, [](const InFlight& f) { return f.work->queued() && f.work->is_completed(); });
    for (const InFlight& f : in_flight_) {
      if (now - f.since > options_.timeout) {
        fail_all(
            std::make_exception_ptr(CollectiveTimeoutError(detail::timeout_message(f.work->what(), options_.timeout))));
        return;
      }
    }
  }

  // Marks the group broken and fails the collectives in flight, then aborts every communicator, so that what is
  // queued on the streams drains and a call blocked on the host returns (its caller then throws the work's error).
  void fail_all(std::exception_ptr error) {
    if (!broken_) broken_ = error;
    for (InFlight& f : in_flight_) f.work->fail(error);  // first: a call the abort ends must find its reason here
    for (auto& [index, c] : channels_) c.communicator->abort();
    in_flight_.clear();
  }

  void watchdog() {
    constexpr auto kWatchEvery = std::chrono::milliseconds(100);
    std::unique_lock lock(mutex_);
    while (true) {
      if (in_flight_.empty()) {
        wake_.wait(lock, [this] { return stopping_ || !in_flight_.empty(); });
      } else {
        wake_.wait_for(lock, kWatchEvery, [this] { return stopping_; });
      }
      if (stopping_) break;
      watch();
    }
  }

  ProcessGroup& bootstrap_;
  detail::AgreementExchange* exchange_;  // the bootstrap's one-exchange agreement, when it has one
  DeviceType type_;
  std::shared_ptr<CollectiveLibrary> library_;
  ProcessGroupOptions options_;
  std::mutex issue_mutex_;  // one collective issued at a time, agreement and library call together
  std::mutex mutex_;        // guards channels_ (the map), in_flight_, stopping_ and broken_
  std::condition_variable wake_;
  std::map<int, Channel> channels_;  // by device index
  std::vector<InFlight> in_flight_;
  bool stopping_ = false;
  std::exception_ptr broken_;
  std::thread watchdog_;
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

  ProcessGroup& host() { return *host_; }

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

detail::AgreementExchange* agreement_exchange(ProcessGroup& bootstrap) {
  if (auto* world = dynamic_cast<WorldGroup*>(&bootstrap)) return agreement_exchange(world->host());
  return dynamic_cast<detail::AgreementExchange*>(&bootstrap);
}

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
