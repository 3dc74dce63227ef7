// NCCL, the collective library of CUDA devices (strata/runtime/collectives.h), loaded with dlopen when the
// first collective on a GPU tensor needs it.
#include "strata/backends/cuda/nccl_library.h"

#include <dlfcn.h>
#include <nccl.h>

#include <atomic>
#include <mutex>

#include "strata/backends/cuda/cuda_check.h"
#include "strata/backends/cuda/library_handles.h"
#include "strata/core/error.h"

namespace strata::cuda {

namespace {

// Note [NCCL is loaded, not linked]
// libstrata never links NCCL, and neither does the plugin: a program that never runs a collective on a GPU does not
// need NCCL installed, and one plugin works with the NCCL of the machine it runs on (the toolkit's, a wheel's, the
// system's), as long as it is at least the version whose API nccl.h describes at build time. The calls are looked
// up by name once; the header gives their types.
struct NcclApi {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetLastError) get_last_error = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
};

// The oldest NCCL with every call and type used here: ncclAvg and ncclBfloat16 came in 2.10.
constexpr int kOldestVersion = 21000;

// Loads NCCL once; `error` says why it could not be, empty when it was.
const NcclApi& api(std::string& error) {
  static std::string why;
  static NcclApi loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    // Found through the plugin's RUNPATH (the toolkit's library folder), LD_LIBRARY_PATH or the system's.
    void* handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      why = fmt::format("NCCL (libnccl.so.2) could not be loaded: {}", err ? err : "not found");
      return;
    }
    NcclApi a;
    bool complete = true;
    const auto find = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      if (fn == nullptr) {
        complete = false;
        if (why.empty()) why = fmt::format("the loaded NCCL has no {}", name);
      }
    };
    find(a.get_version, "ncclGetVersion");
    find(a.get_unique_id, "ncclGetUniqueId");
    find(a.comm_init_rank, "ncclCommInitRank");
    find(a.comm_abort, "ncclCommAbort");
    find(a.comm_get_async_error, "ncclCommGetAsyncError");
    find(a.get_error_string, "ncclGetErrorString");
    find(a.get_last_error, "ncclGetLastError");
    find(a.all_reduce, "ncclAllReduce");
    find(a.broadcast, "ncclBroadcast");
    find(a.all_gather, "ncclAllGather");
    find(a.reduce_scatter, "ncclReduceScatter");
    if (!complete) return;
    int version = 0;
    if (a.get_version(&version) != ncclSuccess || version < kOldestVersion) {
      why = fmt::format("the loaded NCCL is version code {}; Strata needs {} or newer", version, kOldestVersion);
      return;
    }
    loaded = a;
  });
  error = why;
  return loaded;
}

const NcclApi& loaded_api() {
  std::string error;
  const NcclApi& a = api(error);
  STRATA_CHECK(error.empty(), DistributedError, "{}", error);
  return a;
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::U8:
    case DType::Bool: return ncclUint8;
  }
  STRATA_THROW(DTypeError, "NCCL does not move {} tensors", dtype);
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
  }
  return ncclSum;
}

class NcclCommunicator final : public DeviceCommunicator {
 public:
  NcclCommunicator(const NcclApi& api, ncclComm_t comm, int rank, int index)
      : api_(api), comm_(comm), rank_(rank), index_(index) {}

  // Destroying a communicator waits for what is queued on it; the world's groups live until exit (Note [The MPI
  // world ends at exit]) and a communicator ends with its process, so only an abort is ever asked for.
  ~NcclCommunicator() override = default;

  void all_reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op, NativeStream stream) override {
    const RuntimeDeviceGuard device(index_);
    check(api_.all_reduce(send, recv, static_cast<size_t>(count), nccl_type(dtype), nccl_op(op), comm_,
                          to_cuda_stream(stream)),
          "ncclAllReduce");
  }

  void broadcast(void* data, int64_t count, DType dtype, int root, NativeStream stream) override {
    const RuntimeDeviceGuard device(index_);
    check(api_.broadcast(data, data, static_cast<size_t>(count), nccl_type(dtype), root, comm_, to_cuda_stream(stream)),
          "ncclBroadcast");
  }

  void all_gather(const void* send, void* recv, int64_t count, DType dtype, NativeStream stream) override {
    const RuntimeDeviceGuard device(index_);
    check(api_.all_gather(send, recv, static_cast<size_t>(count), nccl_type(dtype), comm_, to_cuda_stream(stream)),
          "ncclAllGather");
  }

  void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op,
                      NativeStream stream) override {
    const RuntimeDeviceGuard device(index_);
    check(api_.reduce_scatter(send, recv, static_cast<size_t>(count), nccl_type(dtype), nccl_op(op), comm_,
                              to_cuda_stream(stream)),
          "ncclReduceScatter");
  }

  std::string async_error() override {
    if (aborted_) return {};
    ncclResult_t result = ncclSuccess;
    if (api_.comm_get_async_error(comm_, &result) != ncclSuccess) return "ncclCommGetAsyncError failed";
    if (result == ncclSuccess || result == ncclInProgress) return {};
    return describe(result);
  }

  void abort() noexcept override {
    if (aborted_.exchange(true)) return;
    (void)api_.comm_abort(comm_);
  }

 private:
  std::string describe(ncclResult_t result) const {
    const char* last = api_.get_last_error(comm_);
    return fmt::format("{}{}{}", api_.get_error_string(result), last != nullptr && *last != '\0' ? ": " : "",
                       last != nullptr ? last : "");
  }

  void check(ncclResult_t result, const char* call) const {
    STRATA_CHECK(!aborted_, DistributedError, "{} on cuda:{}, rank {}: the communicator was aborted", call, index_,
                 rank_);
    if (result != ncclSuccess) {
      STRATA_THROW(DistributedError, "{} failed on cuda:{}, rank {}: {}", call, index_, rank_, describe(result));
    }
  }

  const NcclApi& api_;
  ncclComm_t comm_;
  int rank_;
  int index_;
  // The group's watchdog aborts from its own thread, while the caller's thread may be inside a call (Note [A direct
  // path to the device's library] in dist/device_group.cpp): NCCL's abort is the one call meant for that.
  std::atomic<bool> aborted_ = false;
};

class Nccl final : public CollectiveLibrary {
 public:
  std::string name() const override { return "nccl"; }

  bool available(std::string* why_not) override {
    std::string error;
    (void)api(error);
    if (!error.empty() && why_not != nullptr) *why_not = error;
    return error.empty();
  }

  bool supports(DType) const override { return true; }  // every dtype of Strata has an NCCL type

  std::vector<uint8_t> new_group_id() override {
    ncclUniqueId id;
    const ncclResult_t result = loaded_api().get_unique_id(&id);
    STRATA_CHECK(result == ncclSuccess, DistributedError, "ncclGetUniqueId failed: {}",
                 loaded_api().get_error_string(result));
    return {reinterpret_cast<const uint8_t*>(id.internal), reinterpret_cast<const uint8_t*>(id.internal) + sizeof id};
  }

  std::unique_ptr<DeviceCommunicator> connect(const std::vector<uint8_t>& id, int rank, int size, int index) override {
    const NcclApi& a = loaded_api();
    ncclUniqueId unique;
    STRATA_CHECK(id.size() == sizeof unique.internal, DistributedError,
                 "the NCCL group id from rank 0 has {} bytes, not {}: do all ranks run the same NCCL?", id.size(),
                 sizeof unique.internal);
    std::copy(id.begin(), id.end(), reinterpret_cast<uint8_t*>(unique.internal));
    const RuntimeDeviceGuard device(index);
    ncclComm_t comm = nullptr;
    const ncclResult_t result = a.comm_init_rank(&comm, size, unique, rank);
    STRATA_CHECK(result == ncclSuccess, DistributedError, "ncclCommInitRank on cuda:{} as rank {} of {} failed: {}",
                 index, rank, size, a.get_error_string(result));
    return std::make_unique<NcclCommunicator>(a, comm, rank, index);
  }
};

}  // namespace

void register_nccl() { register_collective_library(DeviceType::CUDA, std::make_shared<Nccl>()); }

}  // namespace strata::cuda
