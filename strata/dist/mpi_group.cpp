// The MPI backend of ProcessGroup: one communication thread owns every MPI call, as c10d's ProcessGroupMPI does.
#include "strata/dist/process_group.h"

#if STRATA_HAVE_MPI

#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "strata/core/error.h"
#include "strata/dist/agreement.h"
#include "strata/tensor/factories.h"

namespace strata::dist {

namespace {

// Note [One thread owns MPI]
// Debian's Open MPI is built with MPI_THREAD_MULTIPLE, but every MPI call of a program made from one thread is the
// simplest contract to keep: the communication thread calls MPI_Init_thread (FUNNELED), every collective, and
// MPI_Finalize, in the order the collectives were issued, which is the order every rank must issue them in. The
// caller's thread only queues work and waits, so a collective overlaps with what the caller does meanwhile (the
// backward pass, for DistributedDataParallel's buckets). Errors return codes (MPI_ERRORS_RETURN), which become
// DistributedError on the waiting thread.
//
// Note [Checking that ranks agree]
// Before each collective the ranks all-gather a dozen integers describing it (which collective, dtype, reduce op,
// root, shape). When they differ, every rank throws CollectiveMismatchError naming rank 0's call and the first rank
// whose call differs, instead of hanging or mixing data of different layouts. The check is always on: it costs one
// small all-gather per collective (latency, not bandwidth: strata-bench's all_reduce rows show it at small sizes),
// and DistributedDataParallel issues a few collectives per step, whereas the failure it catches otherwise shows up
// as a wrong model or a hang far from its cause. A device group's collective (NCCL's) is checked through this thread
// too, by agree(): a job that is the exchange alone, so that it costs one exchange, not an all_gather checked first.
//
// Note [The MPI world ends at exit]
// The world is built once and lives until the process exits. An atexit handler asks the thread to finalize MPI and
// joins it, so that mpirun sees a clean exit. When a collective has timed out the thread may be blocked inside MPI
// for ever: then it is left behind and MPI is not finalized (mpirun reports the rank as failed, which it has).
//
// Note [Naming the lost rank]
// Open MPI without its fault-tolerance extension (ULFM, which Debian's 4.1 lacks) tells a rank neither that a peer
// died nor which one: a collective with a dead peer never finishes, and the timeout is the only sign. What the
// timeout's message can name is the ranks this one was waiting for: in a world of two, exactly the lost one
// (tests/dist/two_hosts_test.sh kills a rank mid-epoch and checks it); in a larger world, the others.

using detail::describe;
using detail::describe_text;
using detail::Descriptor;
using detail::Kind;
using detail::kind_name;

// Note [Naming the lost rank]: the end of the timeout's message on `rank` of `size`.
std::string waited_for(int rank, int size) {
  if (size == 2) return fmt::format("; the other rank, rank {}, did not complete it", 1 - rank);
  return fmt::format("; at least one of the other {} ranks did not complete it (MPI does not say which)", size - 1);
}

// The MPI type of `dtype` for a collective that reduces (`reduces`) or only moves the values: f16 and bf16 move as
// 16-bit integers, and MPI cannot reduce them (MPI_DATATYPE_NULL: Note [Nothing staged behind the caller's back]).
MPI_Datatype mpi_type(DType dtype, bool reduces) {
  switch (dtype) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::U8:
    case DType::Bool: return MPI_UINT8_T;
    case DType::F16:
    case DType::BF16: return reduces ? MPI_DATATYPE_NULL : MPI_UINT16_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
    default: return MPI_SUM;  // Avg is a sum divided afterwards
  }
}

void check_mpi(int code, const char* what, int rank) {
  if (code == MPI_SUCCESS) return;
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int length = 0;
  MPI_Error_string(code, text.data(), &length);
  STRATA_THROW(DistributedError, "{} failed on rank {}: {}", what, rank, std::string(text.data(), length));
}

void divide(void* data, DType dtype, int64_t n, int by) {
  if (dtype == DType::F32) {
    auto* p = static_cast<float*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<float>(by);
  } else {
    auto* p = static_cast<double*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<double>(by);
  }
}

class MpiGroup;

class MpiWork final : public Work {
 public:
  MpiWork(std::string what, std::string waited_for, std::chrono::milliseconds timeout,
          std::shared_ptr<std::atomic<bool>> broken)
      : what_(std::move(what)), waited_for_(std::move(waited_for)), timeout_(timeout), broken_(std::move(broken)) {}

  void wait() override {
    std::unique_lock lock(mutex_);
    // The communication thread runs collectives in order, and after a timeout it may be blocked for ever in the one
    // that timed out: a collective behind it cannot finish, and waiting a whole timeout again for each (as a
    // destructor that waits for every bucket of DistributedDataParallel would) keeps a rank alive long after its peer
    // is gone (Note [Naming the lost rank]).
    STRATA_CHECK(finished_ || !broken_->load(), DistributedError,
                 "{} cannot finish: an earlier collective timed out, and the process group is unusable", what_);
    if (!done_.wait_for(lock, timeout_, [this] { return finished_; })) {
      broken_->store(true);
      throw CollectiveTimeoutError(detail::timeout_message(what_, timeout_) + waited_for_);
    }
    if (error_) std::rethrow_exception(error_);
    if (after_) {
      auto after = std::exchange(after_, nullptr);
      lock.unlock();
      after();
    }
  }

  // The result is in the caller's tensor only once a staged copy is written back: the first call that sees the
  // collective finished does it (on the caller's thread, as wait() would).
  bool is_completed() override {
    std::unique_lock lock(mutex_);
    if (!finished_) return false;
    if (!error_ && after_) {
      auto after = std::exchange(after_, nullptr);
      lock.unlock();
      after();
    }
    return true;
  }

  void finish(std::exception_ptr error) {
    {
      std::lock_guard lock(mutex_);
      finished_ = true;
      error_ = std::move(error);
    }
    done_.notify_all();
  }

  /// Runs on the waiting thread once the collective has finished (copying staged results back to a GPU).
  void set_after(std::function<void()> after) { after_ = std::move(after); }
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  std::string waited_for_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<std::atomic<bool>> broken_;
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::exception_ptr error_;
  std::function<void()> after_;
};

// A tensor as MPI sees it: host memory of an MPI type. CPU tensors of such a type, contiguous, are used in place;
// with ProcessGroupOptions::stage_through_host, others (GPU tensors, f16 and bf16 reductions) go through a host copy
// that is written back when the caller waits, and without it they are refused (Note [Nothing staged behind the
// caller's back]).
struct Staged {
  Tensor original;
  Tensor host;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  bool copied = false;
};

constexpr const char* kOptIn =
    "or let the group stage it through host memory on every rank (ProcessGroupOptions::stage_through_host, "
    "STRATA_DIST_STAGE_THROUGH_HOST=1, init_process_group(..., stage_through_host=True) in Python)";

Staged stage(const char* op, const Tensor& t, bool reduces, bool allowed) {
  STRATA_CHECK(t.defined(), InvalidArgumentError, "{}: the tensor is undefined", op);
  STRATA_CHECK(t.is_contiguous(), InvalidArgumentError,
               "{}: the tensor must be contiguous (call .contiguous() and pass the result)", op);
  Staged s{t, t, mpi_type(t.dtype(), reduces)};
  const bool on_device = !t.device().is_cpu();
  const bool unreducible = s.type == MPI_DATATYPE_NULL;
  if (!on_device && !unreducible) return s;
  if (!allowed) {
    if (on_device) {
      STRATA_THROW(DeviceMismatchError,
                   "{}: a {} tensor, but this world has no collective library for {} devices and MPI moves host "
                   "memory only; copy it to the CPU yourself (t.to(kCPU)) and back, {}",
                   op, t.device(), device_type_name(t.device().type()), kOptIn);
    }
    STRATA_THROW(DTypeError,
                 "{}: MPI cannot reduce {} tensors; convert it to f32 yourself (t.to(DType::F32)) and back, {} (it is "
                 "then reduced as f32 and rounded back to {})",
                 op, t.dtype(), kOptIn, t.dtype());
  }
  const DType wire = unreducible ? DType::F32 : t.dtype();
  s.host = t.to(kCPU).to(wire).contiguous();  // a counted device-to-host copy for a GPU tensor
  s.type = mpi_type(wire, reduces);
  s.copied = true;
  return s;
}

void write_back(Staged& s) {
  if (s.copied) s.original.copy_(s.host.to(s.original.dtype()).to(s.original.device()));
}

class MpiGroup final : public ProcessGroup, public detail::AgreementExchange {
 public:
  explicit MpiGroup(const ProcessGroupOptions& options) : options_(options) {
    Started started;
    thread_ = std::thread([this, &started] { run(started); });
    std::unique_lock lock(started.mutex);
    started.changed.wait(lock, [&started] { return started.done; });
    if (started.error) {
      lock.unlock();
      thread_.join();
      std::rethrow_exception(started.error);
    }
  }

  ~MpiGroup() override { stop(); }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    wake_.notify_all();
    if (broken_->load()) {
      thread_.detach();  // Note [The MPI world ends at exit]
    } else if (thread_.joinable()) {
      thread_.join();
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "mpi"; }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op) override {
    STRATA_CHECK(tensor.defined(), InvalidArgumentError, "all_reduce: the tensor is undefined");
    detail::check_reducible("all_reduce", tensor, op);
    auto staged = std::make_shared<Staged>(stage("all_reduce", tensor, true, options_.stage_through_host));
    return enqueue(Kind::AllReduce, tensor, op, 0, staged, [this, staged, op] {
      Tensor& h = staged->host;
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, h.data_ptr(), static_cast<int>(h.numel()), staged->type, mpi_op(op),
                              MPI_COMM_WORLD),
                "MPI_Allreduce", rank_);
      if (op == ReduceOp::Avg) divide(h.data_ptr(), h.dtype(), h.numel(), size_);
    });
  }

  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override {
    STRATA_CHECK(root >= 0 && root < size_, InvalidArgumentError, "broadcast: root {} is not a rank of a world of {}",
                 root, size_);
    auto staged = std::make_shared<Staged>(stage("broadcast", tensor, false, options_.stage_through_host));
    return enqueue(Kind::Broadcast, tensor, ReduceOp::Sum, root, staged, [this, staged, root] {
      Tensor& h = staged->host;
      check_mpi(MPI_Bcast(h.data_ptr(), static_cast<int>(h.numel()), staged->type, root, MPI_COMM_WORLD), "MPI_Bcast",
                rank_);
    });
  }

  std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) override {
    detail::check_gathered("all_gather", output, input, size_);
    auto in = std::make_shared<Staged>(stage("all_gather", input, false, options_.stage_through_host));
    auto out = std::make_shared<Staged>(stage("all_gather", output, false, options_.stage_through_host));
    return enqueue(Kind::AllGather, input, ReduceOp::Sum, 0, out, [this, in, out] {
      const int count = static_cast<int>(in->host.numel());
      check_mpi(
          MPI_Allgather(in->host.data_ptr(), count, in->type, out->host.data_ptr(), count, out->type, MPI_COMM_WORLD),
          "MPI_Allgather", rank_);
    });
  }

  std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op) override {
    detail::check_gathered("reduce_scatter", input, output, size_);
    detail::check_reducible("reduce_scatter", output, op);
    auto in = std::make_shared<Staged>(stage("reduce_scatter", input, true, options_.stage_through_host));
    auto out = std::make_shared<Staged>(stage("reduce_scatter", output, true, options_.stage_through_host));
    return enqueue(Kind::ReduceScatter, output, op, 0, out, [this, in, out, op] {
      Tensor& h = out->host;
      check_mpi(MPI_Reduce_scatter_block(in->host.data_ptr(), h.data_ptr(), static_cast<int>(h.numel()), out->type,
                                         mpi_op(op), MPI_COMM_WORLD),
                "MPI_Reduce_scatter_block", rank_);
      if (op == ReduceOp::Avg) divide(h.data_ptr(), h.dtype(), h.numel(), size_);
    });
  }

  std::shared_ptr<Work> barrier() override {
    return enqueue(Kind::Barrier, Tensor(), ReduceOp::Sum, 0, nullptr,
                   [this] { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", rank_); });
  }

  // A job that is the agreement check alone: the thread's one exchange, with nothing after it.
  std::shared_ptr<Work> agree(const Descriptor& mine, const std::string& where) override {
    check_usable(kind_name(static_cast<Kind>(mine[0])));
    return enqueue_job(
        mine, fmt::format("the ranks' agreement on {} {}, rank {} of {}", describe_text(mine), where, rank_, size_),
        nullptr, [] {});
  }

 private:
  struct Job {
    Descriptor descriptor;
    std::function<void()> run;
    std::shared_ptr<MpiWork> work;
  };

  void check_usable(const char* op) const {
    STRATA_CHECK(!broken_->load(), DistributedError,
                 "{}: the process group is unusable after an earlier collective timed out on rank {}", op, rank_);
  }

  std::shared_ptr<Work> enqueue(Kind kind, const Tensor& described, ReduceOp op, int root,
                                std::shared_ptr<Staged> result, std::function<void()> run) {
    check_usable(kind_name(kind));
    const Descriptor descriptor = describe(kind, described, op, root);
    return enqueue_job(descriptor, fmt::format("{} on rank {} of {}", describe_text(descriptor), rank_, size_),
                       std::move(result), std::move(run));
  }

  std::shared_ptr<Work> enqueue_job(const Descriptor& descriptor, std::string what, std::shared_ptr<Staged> result,
                                    std::function<void()> run) {
    auto work = std::make_shared<MpiWork>(std::move(what), waited_for(rank_, size_), options_.timeout, broken_);
    if (result && result->copied) work->set_after([result] { write_back(*result); });
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back({descriptor, std::move(run), work});
    }
    wake_.notify_one();
    return work;
  }

  // Note [Checking that ranks agree].
  void check_agreement(const Descriptor& mine) {
    std::vector<int64_t> all(mine.size() * static_cast<std::size_t>(size_));
    check_mpi(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T, all.data(),
                            static_cast<int>(mine.size()), MPI_INT64_T, MPI_COMM_WORLD),
              "MPI_Allgather (checking that ranks agree)", rank_);
    detail::check_agreement(all.data(), size_);
  }

  // How the communication thread tells the constructor that MPI is up, or why not. Not std::promise: its set_value
  // goes through std::call_once, whose thread-locals in libstdc++ this library's initial-exec TLS model would need
  // in static TLS (see ensure_loaded in runtime/registry.cpp).
  struct Started {
    std::mutex mutex;
    std::condition_variable changed;
    bool done = false;
    std::exception_ptr error;
    void finish(std::exception_ptr e) {
      // Notified under the lock: once it is released the constructor may return, and this object is gone.
      std::lock_guard lock(mutex);
      done = true;
      error = std::move(e);
      changed.notify_all();
    }
  };

  void run(Started& started) {
    int provided = 0;
    int initialized = 0;
    MPI_Initialized(&initialized);
    const int code = initialized ? MPI_SUCCESS : MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (code != MPI_SUCCESS) {
      started.finish(std::make_exception_ptr(DistributedError("MPI_Init_thread failed")));
      return;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    started.finish(nullptr);
    while (true) {
      Job job;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) break;  // stopping, with nothing left to run
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      std::exception_ptr error;
      try {
        check_agreement(job.descriptor);
        job.run();
      } catch (...) {
        error = std::current_exception();
      }
      job.work->finish(error);
    }
    if (!initialized) MPI_Finalize();
  }

  ProcessGroupOptions options_;
  int rank_ = 0;
  int size_ = 1;
  std::shared_ptr<std::atomic<bool>> broken_ = std::make_shared<std::atomic<bool>>(false);
  std::mutex mutex_;  // guards jobs_ and stopping_
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

MpiGroup* the_mpi_group = nullptr;

}  // namespace

std::shared_ptr<ProcessGroup> make_mpi_group(const ProcessGroupOptions& options, std::string*) {
  auto group = std::make_shared<MpiGroup>(options);
  // Note [The MPI world ends at exit]: registered once; the group itself is kept by dist::init's world.
  if (the_mpi_group == nullptr) {
    the_mpi_group = group.get();
    std::atexit([] { the_mpi_group->stop(); });
  }
  return group;
}

}  // namespace strata::dist

#else  // !STRATA_HAVE_MPI

namespace strata::dist {

std::shared_ptr<ProcessGroup> make_mpi_group(const ProcessGroupOptions&, std::string* why_not) {
  if (why_not != nullptr) *why_not = "this build of Strata has no MPI (install libopenmpi-dev and rebuild)";
  return nullptr;
}

}  // namespace strata::dist

#endif
