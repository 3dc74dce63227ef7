// The CPU GEMM (Note [One batched GEMM]): oneDNN's matmul primitive for f32, OpenBLAS for f64 and for small f32
// products (and for every f32 product in builds without oneDNN); bf16/f16 on oneDNN's own kernels where it has them
// for this CPU, else through f32 (Note [Reduced precision products on the CPU]).

#include <cblas.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

#if STRATA_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "strata/backends/cpu/onednn.h"
#endif

#include "strata/core/error.h"
#include "strata/core/half.h"
#include "strata/ops/matmul_kernels.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/parallel.h"

namespace strata::cpu {

namespace {

// Note [Choosing the CPU GEMM]
// dnnl_sgemm is the fastest f32 GEMM here from 64^3 on, on both threads (bench/matmul_bench; the tables are in
// docs/benchmarks.md, "Measurements behind the CPU decisions"), but it costs at least ~0.25 us a call and, with B
// transposed (A B^T, as linear's x @ weight.t()), it is much slower than oneDNN's matmul primitive (its brgemm
// kernels). OpenBLAS on the calling thread wins the small products.
// So one product runs on dnnl_sgemm unless it is A B^T, a batch on the cached matmul primitive (it spreads the
// batch over the threads, where a loop of dnnl_sgemm runs one small product at a time), and products below
// kSmallGemmFlops on OpenBLAS on the calling thread (with the machine's CORETYPE=Haswell a few of those shapes would
// be faster on dnnl_sgemm, but fewer, and by less, than the other way round). That cut-off was measured on AVX-512.
// Without AVX-512 dnnl_sgemm overtakes OpenBLAS much sooner, from about 24^3 (32^3: 1.04 against 1.43 us on Zen 3),
// so there products that go to dnnl_sgemm use kSmallSgemmFlopsAvx2; those that go to the primitive (batches and
// A B^T) keep kSmallGemmFlops, since it costs microseconds more per call.
// oneDNN has no f64 GEMM, so f64 uses cblas_dgemm with rows or batch entries split over our pool.
// Builds without oneDNN use OpenBLAS for everything.
constexpr double kSmallGemmFlops = 2.0 * 60 * 60 * 60;
constexpr double kSmallSgemmFlopsAvx2 = 2.0 * 24 * 24 * 24;
// Products below this many flops run on the calling thread: dispatching to the pool costs more.
constexpr double kParallelGemmFlops = 2.0 * 64 * 64 * 64;
static_assert(kSmallGemmFlops <= kParallelGemmFlops, "small products run on OpenBLAS on the calling thread");
// Primitives are cached by shape; a model has few distinct shapes, so the cache is simply dropped when full.
constexpr std::size_t kPrimitiveCacheSize = 512;

// Note [Padding B's rows for AVX2's sgemm]
// Without AVX-512, oneDNN 2.6's sgemm runs about 30 % slower when B is not transposed and its rows are a multiple of
// 512 floats apart with n <= 512, whatever k is: 512^3 at 131 GFLOP/s against 191 with rows 528 floats apart, on the
// 2-core Zen 3 (docs/benchmarks.md, "Measurements behind the CPU decisions"). Which path it takes depends on B's
// address as well (16 bytes past a 32-byte boundary it is fast), so a benchmark on malloc's memory can miss it, but
// tensors, aligned by the allocator, always meet it. Such a B is copied into rows kRowPadding floats longer first:
// 1 MB for 512 x 512, a few percent of the product, so only where A has at least kPaddedRowsMin rows to share the
// copy. AVX-512 machines run other kernels, without this dip, and are left alone.
constexpr int64_t kSlowRowStride = 512;
constexpr int64_t kRowPadding = 16;
constexpr int64_t kPaddedRowsMin = 64;

struct Gemm {
  int64_t batch, m, n, k;
  const TensorView& out;
  const TensorView& a;
  const TensorView& b;
  double alpha, beta;
  double flops() const { return 2.0 * static_cast<double>(batch) * m * n * k; }
};

#if STRATA_HAVE_DNNL
[[noreturn]] void throw_dnnl(const char* op, const dnnl::error& e) {
  STRATA_THROW(BackendError, "{}: oneDNN matmul failed: {} (status {})", op, e.what(), static_cast<int>(e.status));
}

dnnl::memory::data_type dnnl_type(DType dtype) {
  switch (dtype) {
    case DType::BF16: return dnnl::memory::data_type::bf16;
    case DType::F16: return dnnl::memory::data_type::f16;
    default: return dnnl::memory::data_type::f32;
  }
}

dnnl::memory::desc matrix_desc(const TensorView& v, int64_t batch, DType dtype = DType::F32) {
  // A broadcast operand is one matrix of batch size 1 (oneDNN broadcasts batch dims of size 1, not stride 0).
  const bool broadcast = batch > 1 && v.strides[0] == 0;
  const int64_t rows = v.shape[1], cols = v.shape[2];
  const int64_t extent = std::max(rows * v.strides[1], cols * v.strides[2]);
  return dnnl::memory::desc({broadcast ? 1 : batch, rows, cols}, dnnl_type(dtype),
                            {broadcast || batch == 1 ? extent : v.strides[0], v.strides[1], v.strides[2]});
}

// The cached primitive for one shape, layout and (alpha, beta).
dnnl::matmul matmul_primitive(const Gemm& g, const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                              const dnnl::memory::desc& out) {
  using Key = std::array<int64_t, 16>;
  const auto bits = [](double x) { return static_cast<int64_t>(std::bit_cast<uint32_t>(static_cast<float>(x))); };
  const Key key{g.batch,
                g.m,
                g.n,
                g.k,
                a.dims()[0],
                b.dims()[0],
                g.a.strides[0],
                g.a.strides[1],
                g.a.strides[2],
                g.b.strides[0],
                g.b.strides[1],
                g.b.strides[2],
                bits(g.alpha),
                bits(g.beta),
                threads_for_work(true),  // oneDNN fixes a primitive's threads when it is made
                static_cast<int64_t>(a.data_type())};
  static std::mutex mutex;
  static std::map<Key, dnnl::matmul> cache;
  [[maybe_unused]] static const bool held = (hold_across_fork(mutex), true);
  {
    std::lock_guard lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const auto creating = creation_lock();
  dnnl::primitive_attr attr;
  if (g.alpha != 1.0) attr.set_output_scales(0, {static_cast<float>(g.alpha)});
  if (g.beta != 0.0) {
    dnnl::post_ops post;
    post.append_sum(static_cast<float>(g.beta));
    attr.set_post_ops(post);
  }
  dnnl::matmul primitive(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, out), attr, cpu_engine()));
  std::lock_guard lock(mutex);
  if (cache.size() >= kPrimitiveCacheSize) cache.clear();
  cache.emplace(key, primitive);
  return primitive;
}

void onednn_sgemm(const char* op, const Gemm& g, float* out, const float* a, const float* b) {
  try {
    const dnnl::memory::desc ad = matrix_desc(g.a, g.batch), bd = matrix_desc(g.b, g.batch);
    const dnnl::memory::desc od({g.batch, g.m, g.n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::abc);
    const dnnl::matmul primitive = matmul_primitive(g, ad, bd, od);
    thread_local dnnl::stream stream(cpu_engine());
    primitive.execute(stream, {{DNNL_ARG_SRC, dnnl::memory(ad, cpu_engine(), const_cast<float*>(a))},
                               {DNNL_ARG_WEIGHTS, dnnl::memory(bd, cpu_engine(), const_cast<float*>(b))},
                               {DNNL_ARG_DST, dnnl::memory(od, cpu_engine(), out)}});
    stream.wait();
  } catch (const dnnl::error& e) {
    throw_dnnl(op, e);
  }
}

// Note [Reduced precision products on the CPU]
// A bf16 (or f16) product runs on oneDNN's matmul primitive in that dtype, accumulating in f32, where oneDNN has a
// kernel for it on this CPU: native AVX512-BF16 or AMX instructions, or avx512_core's conversion in registers. That
// is autocast's point on a CPU: half the bytes of f32 read, and on AMX several times the f32 rate. Where oneDNN has
// none (oneDNN 2.6 without AVX-512, and f16 short of AMX-FP16), creating the primitive fails as unimplemented, once
// per dtype, and the product goes through f32 instead: the operands converted to contiguous f32, the f32 GEMM, the
// result rounded back, which is what PyTorch's CPU fallback does too.
template <typename T>
bool onednn_reduced_precision_gemm(const char* op, const Gemm& g) {
  static std::atomic<bool> unsupported{false};
  if (unsupported.load(std::memory_order_relaxed)) return false;
  const DType dtype = g.out.dtype;
  try {
    const dnnl::memory::desc ad = matrix_desc(g.a, g.batch, dtype), bd = matrix_desc(g.b, g.batch, dtype);
    const dnnl::memory::desc od({g.batch, g.m, g.n}, dnnl_type(dtype), dnnl::memory::format_tag::abc);
    dnnl::matmul primitive;
    try {
      primitive = matmul_primitive(g, ad, bd, od);
    } catch (const dnnl::error& e) {
      if (e.status != dnnl_unimplemented) throw;
      unsupported.store(true, std::memory_order_relaxed);
      return false;
    }
    thread_local dnnl::stream stream(cpu_engine());
    primitive.execute(stream, {{DNNL_ARG_SRC, dnnl::memory(ad, cpu_engine(), const_cast<T*>(g.a.ptr<T>()))},
                               {DNNL_ARG_WEIGHTS, dnnl::memory(bd, cpu_engine(), const_cast<T*>(g.b.ptr<T>()))},
                               {DNNL_ARG_DST, dnnl::memory(od, cpu_engine(), g.out.ptr<T>())}});
    stream.wait();
  } catch (const dnnl::error& e) {
    throw_dnnl(op, e);
  }
  return true;
}

// Note [Padding B's rows for AVX2's sgemm]: whether B is copied into longer rows first.
bool pads_b_rows(const Gemm& g) {
  return !onednn_uses_avx512() && !ops::gemm_transposed(g.b) && ops::gemm_leading_dim(g.b) % kSlowRowStride == 0 &&
         g.n <= kSlowRowStride && g.m >= kPaddedRowsMin;
}

// One product: oneDNN's sgemm, which takes alpha, beta and transposes directly (no primitive, no memory objects).
void onednn_single_sgemm(const ops::OpCall& call, const Gemm& g, float* out, const float* a, const float* b) {
  int64_t ldb = ops::gemm_leading_dim(g.b);
  DataPtr padded;
  if (pads_b_rows(g)) {
    const int64_t padded_ld = g.n + kRowPadding;
    padded = allocate(call.device, static_cast<std::size_t>(g.k * padded_ld) * sizeof(float));
    auto* rows = static_cast<float*>(padded.get());
    for (int64_t r = 0; r < g.k; ++r) {
      std::memcpy(rows + r * padded_ld, b + r * ldb, static_cast<std::size_t>(g.n) * sizeof(float));
    }
    b = rows;
    ldb = padded_ld;
  }
  const dnnl::status status = dnnl::sgemm(ops::gemm_transposed(g.a) ? 'T' : 'N', ops::gemm_transposed(g.b) ? 'T' : 'N',
                                          g.m, g.n, g.k, static_cast<float>(g.alpha), a, ops::gemm_leading_dim(g.a), b,
                                          ldb, static_cast<float>(g.beta), out, g.n);
  STRATA_CHECK(status == dnnl::status::success, BackendError, "{}: dnnl_sgemm failed with status {}", call.op,
               static_cast<int>(status));
}

#endif

// cblas_sgemm or cblas_dgemm (one thread each, Note [One CPU thread pool]) over every batch entry, with batch
// entries or else row blocks spread over our pool when the product is large enough and `spread` allows it.
template <typename T>
void blas_gemm(const Gemm& g, T* out, const T* a, const T* b, bool spread = true) {
  const CBLAS_TRANSPOSE ta = ops::gemm_transposed(g.a) ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = ops::gemm_transposed(g.b) ? CblasTrans : CblasNoTrans;
  const auto lda = static_cast<int>(ops::gemm_leading_dim(g.a)), ldb = static_cast<int>(ops::gemm_leading_dim(g.b));
  const auto run = [&](int64_t i, int64_t row0, int64_t rows) {
    const T* ai = a + i * g.a.strides[0] + row0 * g.a.strides[1];
    const T* bi = b + i * g.b.strides[0];
    T* oi = out + i * g.m * g.n + row0 * g.n;
    const auto m = static_cast<int>(rows), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, static_cast<float>(g.alpha), ai, lda, bi, ldb,
                  static_cast<float>(g.beta), oi, n);
    } else {
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, g.alpha, ai, lda, bi, ldb, g.beta, oi, n);
    }
  };
  const int threads = num_threads();  // also makes sure OpenBLAS was told to use one thread
  if (!spread || g.flops() < kParallelGemmFlops || threads == 1) {
    for (int64_t i = 0; i < g.batch; ++i) run(i, 0, g.m);
  } else if (g.batch >= threads) {
    parallel_for(g.batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) run(i, 0, g.m);
    });
  } else {
    // Row blocks of at least 16 rows, about one per thread.
    const int64_t block = std::max<int64_t>(16, (g.m + threads - 1) / threads);
    const int64_t blocks = (g.m + block - 1) / block;
    parallel_for(g.batch * blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        const int64_t row0 = j % blocks * block;
        run(j / blocks, row0, std::min(block, g.m - row0));
      }
    });
  }
}

void sgemm([[maybe_unused]] const ops::OpCall& call, const Gemm& g, float* out, const float* a, const float* b) {
#if STRATA_HAVE_DNNL
  // A x B^T (linear's x @ weight.t()) goes to the primitive too: Note [Choosing the CPU GEMM].
  const bool a_times_b_transposed = !ops::gemm_transposed(g.a) && ops::gemm_transposed(g.b);
  const bool to_sgemm = g.batch == 1 && !a_times_b_transposed;
  if (g.flops() >= (to_sgemm && !onednn_uses_avx512() ? kSmallSgemmFlopsAvx2 : kSmallGemmFlops)) {
    if (to_sgemm) threads_for_work(true);  // dnnl_sgemm reads OpenMP's count at each call
    return to_sgemm ? onednn_single_sgemm(call, g, out, a, b) : onednn_sgemm(call.op, g, out, a, b);
  }
#endif
  // Small products (below kParallelGemmFlops too: the calling thread) and builds without oneDNN.
  blas_gemm<float>(g, out, a, b);
}

// f16/bf16 (Note [Reduced precision products on the CPU]): on oneDNN in that dtype, or the operands converted to
// contiguous f32, the f32 GEMM, and the result converted back.
template <typename T>
void reduced_precision_gemm(const ops::OpCall& call, const Gemm& g) {
#if STRATA_HAVE_DNNL
  // The primitive's threads are set where it is looked up (matmul_primitive), as for f32.
  if (g.flops() >= kSmallGemmFlops && onednn_reduced_precision_gemm<T>(call.op, g)) return;
#endif
  const auto to_f32 = [](const TensorView& v, int64_t rows, int64_t cols, int64_t batch) {
    std::vector<float> dense(static_cast<std::size_t>(batch * rows * cols));
    const T* src = v.ptr<T>();
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          dense[static_cast<std::size_t>((i * rows + r) * cols + c)] =
              static_cast<float>(src[i * v.strides[0] + r * v.strides[1] + c * v.strides[2]]);
    return dense;
  };
  const int64_t a_batch = g.a.strides[0] == 0 ? 1 : g.batch, b_batch = g.b.strides[0] == 0 ? 1 : g.batch;
  const std::vector<float> a = to_f32(g.a, g.m, g.k, a_batch), b = to_f32(g.b, g.k, g.n, b_batch);
  std::vector<float> out = g.beta != 0.0 ? to_f32(g.out, g.m, g.n, g.batch)
                                         : std::vector<float>(static_cast<std::size_t>(g.batch * g.m * g.n));
  TensorView av = g.a, bv = g.b, ov = g.out;
  av.dtype = bv.dtype = ov.dtype = DType::F32;
  av.strides = {a_batch == 1 ? 0 : g.m * g.k, g.k, 1};
  bv.strides = {b_batch == 1 ? 0 : g.k * g.n, g.n, 1};
  sgemm(call, Gemm{g.batch, g.m, g.n, g.k, ov, av, bv, g.alpha, g.beta}, out.data(), a.data(), b.data());
  T* dst = g.out.ptr<T>();
  for (std::size_t i = 0; i < out.size(); ++i) dst[i] = T(out[i]);
}

// TF32 is a GPU format; the CPU computes f32 products in f32 whatever the setting.
void gemm_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& a, const TensorView& b, double alpha,
                 double beta, bool /*allow_tf32*/) {
  const Gemm g{out.shape[0], out.shape[1], out.shape[2], a.shape[2], out, a, b, alpha, beta};
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  STRATA_CHECK(std::max({g.m, g.n, g.k, ops::gemm_leading_dim(a), ops::gemm_leading_dim(b)}) <= kMaxInt,
               NotImplementedError,
               "{}: matrices with a dimension above {} are not supported on the CPU (got "
               "{}x{} @ {}x{})",
               call.op, kMaxInt, g.m, g.k, g.k, g.n);
  switch (out.dtype) {
    case DType::F32: return sgemm(call, g, out.ptr<float>(), a.ptr<float>(), b.ptr<float>());
    case DType::F64: return blas_gemm<double>(g, out.ptr<double>(), a.ptr<double>(), b.ptr<double>());
    case DType::F16: return reduced_precision_gemm<Half>(call, g);
    case DType::BF16: return reduced_precision_gemm<BFloat16>(call, g);
    default: STRATA_THROW(DTypeError, "{}: the CPU GEMM does not support {} tensors", call.op, out.dtype);
  }
}

}  // namespace

STRATA_REGISTER_KERNEL("gemm", CPU, GemmFn, gemm_kernel);

}  // namespace strata::cpu
