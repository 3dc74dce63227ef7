// 2-D convolution on the GPU (Note [The DNN kernel contract] in ops/dnn_kernels.h) through cuDNN's legacy
// convolution API: algorithms from cuDNN's heuristics (cached per shape), workspace from our caching allocator on
// the op's stream, bias and ReLU fused by cudnnConvolutionBiasActivationForward where cuDNN supports it.

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/backends/cuda/cuda_check.h"
#include "strata/backends/cuda/library_handles.h"
#include "strata/backends/cuda/library_memory.h"
#include "strata/core/error.h"
#include "strata/ops/dnn_kernels.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/plugin.h"

namespace strata::cuda {

namespace {

// cuDNN 9 names a failed cudaMalloc DEVICE_ALLOCATION_FAILED; the legacy ALLOC_FAILED became HOST_ALLOCATION_FAILED.
// Both count as a shortage: emptying the cache and asking again costs little next to failing.
bool is_allocation_failure(cudnnStatus_t status) {
  return status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
         status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
}

bool cudnn_failed_to_allocate(cudnnStatus_t status) {
  if (!is_allocation_failure(status)) return false;
  (void)cudaGetLastError();  // left by cuDNN's failed cudaMalloc; the retry must not inherit it
  return true;
}

/// `device` is the op's, or -1 for host-side calls (descriptors), which allocate no device memory.
[[noreturn]] void throw_cudnn(cudnnStatus_t status, const char* call, const char* op, int device = -1) {
  // Whatever CUDA error the call left must not be reported again by a later, unrelated launch.
  (void)cudaGetLastError();
  if (device >= 0 && is_allocation_failure(status)) {
    throw_library_out_of_memory(op, "cuDNN", call, cudnnGetErrorString(status), Device(DeviceType::CUDA, device));
  }
  STRATA_THROW(BackendError, "{}: {} failed: {} ({})", op, call, cudnnGetErrorString(status), static_cast<int>(status));
}

/// Host-side calls: descriptors, the stream of a handle.
#define STRATA_CUDNN_CHECK(expr, op)                                   \
  do {                                                                 \
    const cudnnStatus_t strata_cudnn_status_ = (expr);                 \
    if (strata_cudnn_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]] {   \
      ::strata::cuda::throw_cudnn(strata_cudnn_status_, #expr, (op)); \
    }                                                                  \
  } while (false)

/// Runs a cuDNN call that may allocate device memory itself, once more with the cache emptied when it could not
/// (Note [Memory that CUDA libraries allocate themselves] in library_memory.h); returns its last status.
template <typename Call>
cudnnStatus_t run_cudnn(int device, Call&& call) {
  return retry_after_emptying_cache(std::forward<Call>(call), cudnn_failed_to_allocate,
                                    [device] { empty_cache(Device(DeviceType::CUDA, device)); });
}

/// Calls that run on the device or create a handle; a shortage that persists is an OutOfMemoryError.
#define STRATA_CUDNN_RUN(expr, op, device)                                                  \
  do {                                                                                      \
    const int strata_cudnn_device_ = (device);                                              \
    const cudnnStatus_t strata_cudnn_status_ =                                              \
        ::strata::cuda::run_cudnn(strata_cudnn_device_, [&] { return (expr); });            \
    if (strata_cudnn_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]] {                        \
      ::strata::cuda::throw_cudnn(strata_cudnn_status_, #expr, (op), strata_cudnn_device_); \
    }                                                                                       \
  } while (false)

// One cuDNN handle per host thread and device, pointed at the op's stream before each call (as Note [cuBLAS
// handles] in matmul.cpp explains for cuBLAS).
class Handles {
 public:
  cudnnHandle_t get(int device, const char* op) {
    cudnnHandle_t& h = handles_.at(device).handle;
    if (h == nullptr) STRATA_CUDNN_RUN(cudnnCreate(&h), op, device);
    return h;
  }

 private:
  ThreadHandles<cudnnHandle_t, cudnnStatus_t, cudnnDestroy> handles_;
};

// Descriptors own their cuDNN object; created per call (cheap host-side structs).
template <typename T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Descriptor {
 public:
  explicit Descriptor(const char* op) { STRATA_CUDNN_CHECK(Create(&desc_), op); }
  ~Descriptor() { (void)Destroy(desc_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  T get() const { return desc_; }

 private:
  T desc_ = nullptr;
};
using TensorDesc = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using ActivationDesc =
    Descriptor<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;

int as_int(int64_t value, const char* op) {
  STRATA_CHECK(value <= std::numeric_limits<int>::max(), NotImplementedError,
               "{}: a convolution size of {} exceeds what cuDNN takes ({})", op, value,
               std::numeric_limits<int>::max());
  return static_cast<int>(value);
}

cudnnDataType_t data_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::F64: return CUDNN_DATA_DOUBLE;
    case DType::F16: return CUDNN_DATA_HALF;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    default: STRATA_THROW(DTypeError, "{}: cuDNN convolutions do not support {} tensors", op, dtype);
  }
}

/// alpha / beta as cuDNN reads them: double for f64 data, float otherwise.
struct Scaling {
  float f[2] = {1.0f, 0.0f};
  double d[2] = {1.0, 0.0};
  bool f64 = false;
  const void* one() const { return f64 ? static_cast<const void*>(&d[0]) : &f[0]; }
  const void* zero() const { return f64 ? static_cast<const void*>(&d[1]) : &f[1]; }
};

enum class Pass : int64_t { Forward, BackwardData, BackwardFilter };

/// Everything one cuDNN convolution call needs: handle, descriptors and data pointers' dtype.
struct CudnnConv {
  const char* op;
  int device;
  cudnnHandle_t handle;
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  Scaling scale;
  std::array<int64_t, 18> key{};

  CudnnConv(const ops::OpCall& call, const TensorView& input, const TensorView& weight, const TensorView& out,
       const ops::Conv2dParams& p)
      : op(call.op),
        device(backend_index(call.device)),
        handle(nullptr),
        x(call.op),
        y(call.op),
        w(call.op),
        conv(call.op) {
    thread_local Handles handles;
    handle = handles.get(device, op);
    STRATA_CUDNN_CHECK(cudnnSetStream(handle, to_cuda_stream(call.stream)), op);
    const cudnnDataType_t type = data_type(input.dtype, op);
    scale.f64 = input.dtype == DType::F64;
    const auto i = [this](int64_t v) { return as_int(v, op); };
    // cuDNN's legacy API indexes a tensor with 32 bits, whatever its sizes are one by one.
    for (const auto& [what, v] : {std::pair{"input", &input}, {"weight", &weight}, {"output", &out}}) {
      STRATA_CHECK(v->numel() <= std::numeric_limits<int>::max(), NotImplementedError,
                   "{}: the {} has {} elements, more than cuDNN's convolutions index ({}); split the batch", op, what,
                   v->numel(), std::numeric_limits<int>::max());
    }
    STRATA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x.get(), CUDNN_TENSOR_NCHW, type, i(input.shape[0]),
                                                  i(input.shape[1]), i(input.shape[2]), i(input.shape[3])),
                       op);
    STRATA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y.get(), CUDNN_TENSOR_NCHW, type, i(out.shape[0]), i(out.shape[1]),
                                                  i(out.shape[2]), i(out.shape[3])),
                       op);
    STRATA_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w.get(), type, CUDNN_TENSOR_NCHW, i(weight.shape[0]),
                                                  i(weight.shape[1]), i(weight.shape[2]), i(weight.shape[3])),
                       op);
    const cudnnDataType_t compute = scale.f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    STRATA_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv.get(), i(p.pad_h), i(p.pad_w), i(p.stride_h),
                                                       i(p.stride_w), i(p.dilation_h), i(p.dilation_w),
                                                       CUDNN_CROSS_CORRELATION, compute),
                       op);
    STRATA_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv.get(), i(p.groups)), op);
    STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), math_type(input.dtype, p.allow_tf32)), op);
    key = {device,          static_cast<int64_t>(input.dtype), input.shape[0], input.shape[1], input.shape[2],
           input.shape[3],  weight.shape[0], weight.shape[2], weight.shape[3], p.stride_h,     p.stride_w,
           p.pad_h,         p.pad_w,         p.dilation_h,    p.dilation_w,    p.groups,       p.allow_tf32,
           0};
  }

  // f32 uses TF32 tensor cores only when the user allowed them (set_allow_tf32); f16/bf16 always may.
  static cudnnMathType_t math_type(DType dtype, bool allow_tf32) {
    if (dtype == DType::F16 || dtype == DType::BF16) return CUDNN_TENSOR_OP_MATH;
    if (dtype == DType::F32 && allow_tf32) return CUDNN_DEFAULT_MATH;
    return CUDNN_FMA_MATH;
  }
};

// Note [cuDNN algorithm choice]
// cuDNN's heuristics (the _v7 queries) rank the algorithms for a shape without running them; the candidates are
// those cuDNN says work and, for f32 without TF32, that do not need tensor-op math, in cuDNN's order. They are
// cached per pass, shape and parameters, since the queries cost tens of microseconds. A pass runs with the first
// candidate that works, trying the next one when
//  - our allocator cannot give the candidate's workspace: the fastest often needs the most, and under a memory
//    limit (STRATA_MEMORY_LIMIT) or on a full GPU a slower one with less workspace still runs, where taking only
//    the first would fail with OutOfMemoryError although the convolution can be done;
//  - cuDNN answers the call itself with a NOT_SUPPORTED status: the heuristics are a prediction, and cuDNN checks
//    some limits (shared memory, launch bounds) only when it is asked to run. The call has launched nothing then,
//    so nothing is left half done. PyTorch's cuDNN convolutions move on to the next algorithm the same way, and
//    so does the clearing of the CUDA runtime's last-error slot after a refusal: an error a refusal leaves there
//    would otherwise be reported by the next kernel's launch check, blaming an unrelated op.
// A candidate that fails to allocate cuDNN's own device memory runs once more with the cache emptied (Note [Memory
// that CUDA libraries allocate themselves] in library_memory.h), then is an OutOfMemoryError.
// Any other status (a bad parameter, a failed execution, whose CUDA error may be sticky) is reported at once. The
// candidate that ran moves to the front of the cached list, and one cuDNN refused leaves it, so later calls do not
// ask again for what failed. When no candidate runs, the error says why: an OutOfMemoryError if any candidate
// lacked workspace (memory is what a user can change), else the last refusal. Benchmarking (cudnnFind*) would pick
// faster algorithms for some shapes at the price of running every candidate once; it is a possible refinement.
// Only deterministic algorithms are candidates while cuDNN offers one: some backward passes (the filter's ALGO_0
// and ALGO_3, the data's ALGO_0) add partial sums with atomics, whose order changes from run to run, and then two
// runs of the same training differ in the last bits and strata-train's resume no longer equals the uninterrupted
// run (tests/tools/train_test.cpp, on cuda:0). PyTorch makes the same choice only under
// torch.backends.cudnn.deterministic; Strata makes it always, as its CPU results reproduce too. A shape for which
// cuDNN offers only non-deterministic algorithms still runs, with them.
struct Algorithm {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace = 0;
  bool operator==(const Algorithm& other) const { return algo == other.algo && math == other.math; }
};

/// Workspace of `bytes` from our caching allocator, on the op's stream.
DataPtr workspace(const ops::OpCall& call, std::size_t bytes) {
  return bytes == 0 ? DataPtr() : allocator(call.device).allocate(bytes, call.stream, call.op);
}

/// The candidate algorithms of one pass, as cuDNN's heuristics rank them (Note [cuDNN algorithm choice]).
template <typename Perf, typename Query>
std::vector<Algorithm> candidates(CudnnConv& c, cudnnDataType_t type, bool allow_tf32, Query query) {
  constexpr int kMaxAlgorithms = 16;
  std::array<Perf, kMaxAlgorithms> perf{};
  int count = 0;
  STRATA_CUDNN_CHECK(query(kMaxAlgorithms, &count, perf.data()), c.op);
  const bool tensor_ops_ok = type != CUDNN_DATA_FLOAT || allow_tf32;
  std::vector<Algorithm> found, nondeterministic;
  for (int i = 0; i < count; ++i) {
    const Perf& candidate = perf[static_cast<std::size_t>(i)];
    if (candidate.status != CUDNN_STATUS_SUCCESS) continue;
    if (!tensor_ops_ok && candidate.mathType != CUDNN_FMA_MATH && candidate.mathType != CUDNN_DEFAULT_MATH) continue;
    // The math type is written back to the descriptor before the call, and for f32 on sm_80+ CUDNN_DEFAULT_MATH
    // lets cuDNN use TF32 tensor cores: without TF32 allowed, an algorithm offered with it runs with FMA math.
    const cudnnMathType_t math = tensor_ops_ok ? candidate.mathType : CUDNN_FMA_MATH;
    (candidate.determinism == CUDNN_DETERMINISTIC ? found : nondeterministic)
        .push_back({static_cast<int>(candidate.algo), math, candidate.memory});
  }
  if (found.empty()) found = std::move(nondeterministic);
  STRATA_CHECK(!found.empty(), BackendError, "{}: cuDNN offers no convolution algorithm for this shape and dtype",
               c.op);
  return found;
}

/// Runs one convolution pass: `execute(algorithm, workspace)` makes the cuDNN call and returns its status; the
/// candidates are tried in turn as Note [cuDNN algorithm choice] says.
template <typename Perf, typename Query, typename Execute>
void run_pass(const ops::OpCall& call, CudnnConv& c, Pass pass, cudnnDataType_t type, bool allow_tf32, Query query,
              Execute execute, const char* what) {
  using Key = std::array<int64_t, 18>;
  auto key = c.key;
  key[17] = static_cast<int64_t>(pass);
  static std::mutex mutex;
  static std::map<Key, std::vector<Algorithm>> cache;
  std::vector<Algorithm> to_try;
  {
    std::lock_guard lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) to_try = it->second;
  }
  if (to_try.empty()) {
    to_try = candidates<Perf>(c, type, allow_tf32, query);
    std::lock_guard lock(mutex);
    cache.insert_or_assign(key, to_try);
  }
  const auto update_cache = [&](const Algorithm& a, bool ran) {
    std::lock_guard lock(mutex);
    std::vector<Algorithm>& cached = cache[key];
    const auto it = std::find(cached.begin(), cached.end(), a);
    if (it == cached.end()) return;
    if (ran) {
      std::rotate(cached.begin(), it, it + 1);
    } else {
      cached.erase(it);
    }
  };
  std::exception_ptr out_of_memory;
  cudnnStatus_t refused = CUDNN_STATUS_SUCCESS;
  int refused_algo = -1;
  for (std::size_t i = 0; i < to_try.size(); ++i) {
    const Algorithm& a = to_try[i];
    DataPtr ws;
    try {
      ws = workspace(call, a.workspace);
    } catch (const OutOfMemoryError&) {
      out_of_memory = std::current_exception();
      continue;
    }
    STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(c.conv.get(), a.math), c.op);
    const cudnnStatus_t status = run_cudnn(c.device, [&] { return execute(a, ws.get()); });
    if (status == CUDNN_STATUS_SUCCESS) {
      if (i > 0) update_cache(a, true);
      return;
    }
    if (CUDNN_STATUS_CATEGORY(status) != CUDNN_STATUS_NOT_SUPPORTED) throw_cudnn(status, what, c.op, c.device);
    (void)cudaGetLastError();  // see Note [cuDNN algorithm choice]
    update_cache(a, false);
    refused = status;
    refused_algo = a.algo;
  }
  if (out_of_memory) std::rethrow_exception(out_of_memory);
  STRATA_THROW(
      BackendError,
      "{}: {} ran with none of the {} algorithms cuDNN's heuristics offered; the last, algorithm {}, failed: {} ({})",
      c.op, what, to_try.size(), refused_algo, cudnnGetErrorString(refused), static_cast<int>(refused));
}

void* at(const TensorView& v) {
  return static_cast<char*>(v.data) + v.offset * static_cast<int64_t>(dtype_size(v.dtype));
}

void conv2d_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& input, const TensorView& weight,
                   const TensorView& bias, const ops::Conv2dParams& p) {
  const int device = backend_index(call.device);
  RuntimeDeviceGuard guard(device);
  CudnnConv c(call, input, weight, out, p);
  const cudnnDataType_t type = data_type(input.dtype, call.op);

  TensorDesc bias_desc(call.op);
  ActivationDesc relu(call.op);
  if (bias.data != nullptr) {
    STRATA_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(bias_desc.get(), CUDNN_TENSOR_NCHW, type, 1, as_int(bias.shape[0], call.op), 1, 1),
        call.op);
  }
  if (p.relu) {
    STRATA_CUDNN_CHECK(cudnnSetActivationDescriptor(relu.get(), CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0),
                       call.op);
  }
  const bool fuse = p.relu && bias.data != nullptr;
  const auto out_bytes = static_cast<std::size_t>(out.numel()) * dtype_size(out.dtype);
  bool fused = false;
  run_pass<cudnnConvolutionFwdAlgoPerf_t>(
      call, c, Pass::Forward, type, p.allow_tf32,
      [&](int n, int* count, cudnnConvolutionFwdAlgoPerf_t* perf) {
        return cudnnGetConvolutionForwardAlgorithm_v7(c.handle, c.x.get(), c.w.get(), c.conv.get(), c.y.get(), n, count,
                                                      perf);
      },
      [&](const Algorithm& algo, void* ws) {
        const auto fwd_algo = static_cast<cudnnConvolutionFwdAlgo_t>(algo.algo);
        if (fuse) {
          // One fused call: y = relu(conv(x, w) + 0 * z + bias), with z = y.
          // z may be read despite alpha2 = 0, and 0 * NaN = NaN: one memset of y is cheaper than a separate zero z.
          STRATA_CUDA_CHECK(cudaMemsetAsync(at(out), 0, out_bytes, to_cuda_stream(call.stream)),
                            fmt::format("{}: zeroing the fused convolution's output", call.op));
          fused = cudnnConvolutionBiasActivationForward(c.handle, c.scale.one(), c.x.get(), at(input), c.w.get(),
                                                        at(weight), c.conv.get(), fwd_algo, ws, algo.workspace,
                                                        c.scale.zero(), c.y.get(), at(out), bias_desc.get(), at(bias),
                                                        relu.get(), c.y.get(), at(out)) == CUDNN_STATUS_SUCCESS;
          if (fused) return CUDNN_STATUS_SUCCESS;
          // cuDNN fuses fewer dtypes and algorithms than it runs separately; the separate steps below report any
          // real failure. The refusal's CUDA error, if any, goes as in Note [cuDNN algorithm choice].
          (void)cudaGetLastError();
        }
        return cudnnConvolutionForward(c.handle, c.scale.one(), c.x.get(), at(input), c.w.get(), at(weight),
                                       c.conv.get(), fwd_algo, ws, algo.workspace, c.scale.zero(), c.y.get(), at(out));
      },
      "cudnnConvolutionForward");
  if (fused) return;
  if (bias.data != nullptr) {
    STRATA_CUDNN_RUN(
        cudnnAddTensor(c.handle, c.scale.one(), bias_desc.get(), at(bias), c.scale.one(), c.y.get(), at(out)), call.op,
        device);
  }
  if (p.relu) {
    STRATA_CUDNN_RUN(cudnnActivationForward(c.handle, relu.get(), c.scale.one(), c.y.get(), at(out), c.scale.zero(),
                                            c.y.get(), at(out)),
                     call.op, device);
  }
}

void backward_data(const ops::OpCall& call, const TensorView& grad_input, const TensorView& grad_output,
                   const TensorView& weight, const ops::Conv2dParams& p) {
  const int device = backend_index(call.device);
  RuntimeDeviceGuard guard(device);
  CudnnConv c(call, grad_input, weight, grad_output, p);
  const cudnnDataType_t type = data_type(grad_input.dtype, call.op);
  run_pass<cudnnConvolutionBwdDataAlgoPerf_t>(
      call, c, Pass::BackwardData, type, p.allow_tf32,
      [&](int n, int* count, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(c.handle, c.w.get(), c.y.get(), c.conv.get(), c.x.get(),
                                                           n, count, perf);
      },
      [&](const Algorithm& algo, void* ws) {
        return cudnnConvolutionBackwardData(c.handle, c.scale.one(), c.w.get(), at(weight), c.y.get(), at(grad_output),
                                            c.conv.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(algo.algo), ws,
                                            algo.workspace, c.scale.zero(), c.x.get(), at(grad_input));
      },
      "cudnnConvolutionBackwardData");
}

void backward_weight(const ops::OpCall& call, const TensorView& grad_weight, const TensorView& grad_bias,
                     const TensorView& input, const TensorView& grad_output, const ops::Conv2dParams& p) {
  const int device = backend_index(call.device);
  RuntimeDeviceGuard guard(device);
  CudnnConv c(call, input, grad_weight, grad_output, p);
  const cudnnDataType_t type = data_type(input.dtype, call.op);
  run_pass<cudnnConvolutionBwdFilterAlgoPerf_t>(
      call, c, Pass::BackwardFilter, type, p.allow_tf32,
      [&](int n, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(c.handle, c.x.get(), c.y.get(), c.conv.get(), c.w.get(),
                                                             n, count, perf);
      },
      [&](const Algorithm& algo, void* ws) {
        return cudnnConvolutionBackwardFilter(c.handle, c.scale.one(), c.x.get(), at(input), c.y.get(), at(grad_output),
                                              c.conv.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo.algo), ws,
                                              algo.workspace, c.scale.zero(), c.w.get(), at(grad_weight));
      },
      "cudnnConvolutionBackwardFilter");
  if (grad_bias.data != nullptr) {
    TensorDesc bias_desc(call.op);
    STRATA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(bias_desc.get(), CUDNN_TENSOR_NCHW, type, 1,
                                                  as_int(grad_bias.shape[0], call.op), 1, 1),
                       call.op);
    STRATA_CUDNN_RUN(cudnnConvolutionBackwardBias(c.handle, c.scale.one(), c.y.get(), at(grad_output), c.scale.zero(),
                                                  bias_desc.get(), at(grad_bias)),
                     call.op, device);
  }
}

void conv2d_backward_kernel(const ops::OpCall& call, const TensorView& grad_input, const TensorView& grad_weight,
                            const TensorView& grad_bias, const TensorView& grad_output, const TensorView& input,
                            const TensorView& weight, const ops::Conv2dParams& p) {
  if (grad_input.data != nullptr) backward_data(call, grad_input, grad_output, weight, p);
  if (grad_weight.data != nullptr) backward_weight(call, grad_weight, grad_bias, input, grad_output, p);
}

}  // namespace

STRATA_REGISTER_KERNEL("conv2d", CUDA, Conv2dFn, conv2d_kernel);
STRATA_REGISTER_KERNEL("conv2d_backward", CUDA, Conv2dBackwardFn, conv2d_backward_kernel);

}  // namespace strata::cuda
