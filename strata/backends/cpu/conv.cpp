// 2-D convolution on the CPU (Note [The DNN kernel contract] in ops/dnn_kernels.h): oneDNN's convolution
// primitives for f32, im2col + OpenBLAS for f64 and for every dtype in builds without oneDNN.

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#if STRATA_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "strata/backends/cpu/onednn.h"
#endif

#include "strata/backends/portable/reduce_accumulators.h"
#include "strata/core/error.h"
#include "strata/ops/dnn_kernels.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/parallel.h"

namespace strata::cpu {

namespace {

/// The sizes of one convolution, read from the contract's views.
struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow;
  ops::Conv2dParams p;
  int64_t cg() const { return c / p.groups; }  // input channels per group
  int64_t og() const { return o / p.groups; }  // output channels per group
  int64_t k() const { return cg() * kh * kw; }  // rows of a group's im2col matrix
  int64_t spatial() const { return oh * ow; }
};

ConvShape conv_shape(const TensorView& input, const TensorView& weight, const TensorView& out,
                     const ops::Conv2dParams& p) {
  // A blocked input [N, C/b, H, W, b] has C/b blocks of b channels (the `_blocked` entries).
  const int64_t channels = input.dim() == 5 ? input.shape[1] * input.shape[4] : input.shape[1];
  return {input.shape[0], channels, input.shape[2], input.shape[3], weight.shape[0], weight.shape[2],
          weight.shape[3], out.shape[2],  out.shape[3],   p};
}

// --- im2col + GEMM: any dtype BLAS has, any parameters ---

template <typename T>
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc) {
  const auto i = [](int64_t x) { return static_cast<int>(x); };
  const CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
#if STRATA_HAVE_DNNL
    // oneDNN's sgemm has AVX-512 kernels whatever OPENBLAS_CORETYPE says (Note [Choosing the CPU GEMM]); inside
    // our pool's parallel region it runs on the calling thread.
    const dnnl::status status =
        dnnl::sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    STRATA_CHECK(status == dnnl::status::success, BackendError, "conv2d: dnnl_sgemm failed with status {}",
                 static_cast<int>(status));
#else
    cblas_sgemm(CblasRowMajor, opa, opb, i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c, i(ldc));
#endif
  } else {
    cblas_dgemm(CblasRowMajor, opa, opb, i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c, i(ldc));
  }
}

// Calls fn(at, input_row, x0) for every (channel, ki, kj, oy) of one group's patch matrix [k, oh * ow], whose
// rows are `ld` apart (ld >= oh * ow): `at` is where that stretch of ow values starts, `input_row` the input row
// that kernel row ki of output row oy reads (nullptr when it lies in the padding), x0 the column of its first tap.
template <typename T, typename Fn>
void for_each_patch_row(const ConvShape& s, T* x, int64_t ld, Fn fn) {
  const ops::Conv2dParams& p = s.p;
  for (int64_t ch = 0; ch < s.cg(); ++ch)
    for (int64_t ki = 0; ki < s.kh; ++ki)
      for (int64_t kj = 0; kj < s.kw; ++kj) {
        const int64_t row = (ch * s.kh + ki) * s.kw + kj;
        for (int64_t oy = 0; oy < s.oh; ++oy) {
          const int64_t iy = oy * p.stride_h - p.pad_h + ki * p.dilation_h;
          fn(row * ld + oy * s.ow, iy >= 0 && iy < s.h ? x + (ch * s.h + iy) * s.w : nullptr,
             kj * p.dilation_w - p.pad_w);
        }
      }
}

// col[k, oh * ow] = the input patches of one group of one sample (x: [cg, h, w]); col's rows are `ld` apart.
template <typename T>
void im2col(const ConvShape& s, const T* x, T* col, int64_t ld) {
  const int64_t stride = s.p.stride_w;
  for_each_patch_row(s, const_cast<T*>(x), ld, [&](int64_t at, const T* row, int64_t x0) {
    T* dst = col + at;
    if (row == nullptr) {
      std::fill(dst, dst + s.ow, T(0));
      return;
    }
    // Outputs [lo, hi) read inside the row (x0 + ox * stride in [0, w)); the rest read padding.
    const int64_t lo = std::clamp<int64_t>((-x0 + stride - 1) / stride, 0, s.ow);
    const int64_t hi = std::clamp<int64_t>((s.w - x0 + stride - 1) / stride, lo, s.ow);
    std::fill(dst, dst + lo, T(0));
    if (stride == 1) {
      std::copy(row + x0 + lo, row + x0 + hi, dst + lo);
    } else {
      for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = row[x0 + ox * stride];
    }
    std::fill(dst + hi, dst + s.ow, T(0));
  });
}

// x[cg, h, w] += the patches of col, the adjoint of im2col.
template <typename T>
void col2im(const ConvShape& s, const T* col, T* x) {
  for_each_patch_row(s, x, s.spatial(), [&](int64_t at, T* row, int64_t x0) {
    if (row == nullptr) return;
    for (int64_t ox = 0; ox < s.ow; ++ox) {
      const int64_t ix = x0 + ox * s.p.stride_w;
      if (ix >= 0 && ix < s.w) row[ix] += col[at + ox];
    }
  });
}

// A 1x1 kernel with stride 1 and no padding reads the input as its own patch matrix.
bool patches_are_input(const ConvShape& s) {
  return s.kh == 1 && s.kw == 1 && s.p.stride_h == 1 && s.p.stride_w == 1 && s.p.pad_h == 0 && s.p.pad_w == 0;
}

template <typename T>
void gemm_forward(const ConvShape& s, T* out, const T* in, const T* weight, const T* bias) {
  parallel_for(s.n, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> col(patches_are_input(s) ? 0 : static_cast<std::size_t>(s.k() * s.spatial()));
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t g = 0; g < s.p.groups; ++g) {
        const T* x = in + (i * s.c + g * s.cg()) * s.h * s.w;
        if (!col.empty()) im2col(s, x, col.data(), s.spatial());
        T* y = out + (i * s.o + g * s.og()) * s.spatial();
        blas_gemm<T>(false, false, s.og(), s.spatial(), s.k(), T(1), weight + g * s.og() * s.k(), s.k(),
                     col.empty() ? x : col.data(), s.spatial(), T(0), y, s.spatial());
      }
      T* y = out + i * s.o * s.spatial();
      for (int64_t oc = 0; oc < s.o; ++oc) {
        T* plane = y + oc * s.spatial();
        const T b = bias != nullptr ? bias[oc] : T(0);
        for (int64_t j = 0; j < s.spatial(); ++j) {
          const T v = plane[j] + b;
          plane[j] = s.p.relu && !(v > T(0)) ? T(0) : v;
        }
      }
    }
  });
}

template <typename T>
void gemm_backward_data(const ConvShape& s, T* grad_in, const T* grad_out, const T* weight) {
  parallel_for(s.n, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> col(static_cast<std::size_t>(s.k() * s.spatial()));
    for (int64_t i = begin; i < end; ++i) {
      T* dx = grad_in + i * s.c * s.h * s.w;
      for (int64_t g = 0; g < s.p.groups; ++g) {
        const T* dy = grad_out + (i * s.o + g * s.og()) * s.spatial();
        T* dxg = dx + g * s.cg() * s.h * s.w;
        // col = W_g^T dy_g: [k, og] x [og, oh * ow]
        if (patches_are_input(s)) {
          blas_gemm<T>(true, false, s.k(), s.spatial(), s.og(), T(1), weight + g * s.og() * s.k(), s.k(), dy,
                       s.spatial(), T(0), dxg, s.spatial());
          continue;
        }
        blas_gemm<T>(true, false, s.k(), s.spatial(), s.og(), T(1), weight + g * s.og() * s.k(), s.k(), dy,
                     s.spatial(), T(0), col.data(), s.spatial());
        std::fill(dxg, dxg + s.cg() * s.h * s.w, T(0));
        col2im(s, col.data(), dxg);
      }
    }
  });
}

// Sums one term per image over the batch: one chunk of images per thread, each chunk accumulating into its own
// buffer of `size` values (the first chunk's is `out`), the buffers added up at the end. term(i, acc, beta, scratch)
// adds image i's term to acc (beta 0 for a chunk's first image: acc is overwritten); scratch is its chunk's own
// work buffer, sized by the term.
template <typename T, typename Term>
void sum_over_batch(int64_t n, int64_t size, T* out, Term term) {
  const int64_t chunks = std::min<int64_t>(num_threads(), std::max<int64_t>(n, 1));
  std::vector<T> partial(static_cast<std::size_t>((chunks - 1) * size));
  parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> scratch;
    for (int64_t c = begin; c < end; ++c) {
      T* acc = c == 0 ? out : partial.data() + (c - 1) * size;
      const int64_t first = n * c / chunks, last = n * (c + 1) / chunks;
      if (first == last) std::fill(acc, acc + size, T(0));
      for (int64_t i = first; i < last; ++i) term(i, acc, i == first ? T(0) : T(1), scratch);
    }
  });
  for (int64_t c = 1; c < chunks; ++c) {
    const T* p = partial.data() + (c - 1) * size;
    for (int64_t j = 0; j < size; ++j) out[j] += p[j];
  }
}

// grad_bias[oc]: channel oc's gradient summed over the batch, each plane in eight partial sums (sum_in_lanes).
template <typename T>
void bias_gradient(const ConvShape& s, T* grad_bias, const T* grad_out) {
  parallel_for(s.o, 1, [&](int64_t begin, int64_t end) {
    for (int64_t oc = begin; oc < end; ++oc) {
      T sum = 0;
      for (int64_t i = 0; i < s.n; ++i) {
        sum += portable::sum_in_lanes<T, false>(grad_out + (i * s.o + oc) * s.spatial(), s.spatial());
      }
      grad_bias[oc] = sum;
    }
  });
}

template <typename T>
void gemm_backward_weight(const ConvShape& s, T* grad_weight, T* grad_bias, const T* in, const T* grad_out) {
  // dW_g = sum over the batch of dy_g col^T: [og, oh * ow] x [oh * ow, k]. (Taking several images per GEMM,
  // patches and gradients side by side, measured no faster for a thin first layer.)
  sum_over_batch<T>(s.n, s.o * s.k(), grad_weight, [&](int64_t i, T* dw, T beta, std::vector<T>& col) {
    if (!patches_are_input(s)) col.resize(static_cast<std::size_t>(s.k() * s.spatial()));
    for (int64_t g = 0; g < s.p.groups; ++g) {
      const T* x = in + (i * s.c + g * s.cg()) * s.h * s.w;
      if (!col.empty()) im2col(s, x, col.data(), s.spatial());
      const T* dy = grad_out + (i * s.o + g * s.og()) * s.spatial();
      blas_gemm<T>(false, true, s.og(), s.k(), s.spatial(), T(1), dy, s.spatial(), col.empty() ? x : col.data(),
                   s.spatial(), beta, dw + g * s.og() * s.k(), s.k());
    }
  });
  if (grad_bias != nullptr) bias_gradient(s, grad_bias, grad_out);
}

// dW_g^T = sum over the batch of [col; 1] dy_g^T: [k + 1, oh * ow] x [oh * ow, og], the patch matrix with a row
// of ones under it, whose row of the product is the bias gradient (Note [Weight gradients of thin convolutions]).
// A blocked grad_output [N, O/b, OH, OW, b] (s.p.dst_block = b, one group) holds dy^T's columns b at a time, [oh * ow,
// b] blocks with rows b apart: one product per block, into b columns of the result.
template <typename T>
void gemm_backward_weight_transposed(const ConvShape& s, T* grad_weight, T* grad_bias, const T* in, const T* grad_out) {
  const int64_t block = s.p.dst_block;
  STRATA_CHECK(block == 0 || (s.p.groups == 1 && s.o % block == 0), NotImplementedError,
               "conv2d: a blocked weight gradient of {} groups and {} channels in blocks of {}", s.p.groups, s.o,
               block);
  const int64_t rows = s.k() + 1;
  std::vector<T> sums(static_cast<std::size_t>(s.p.groups * rows * s.og()));
  sum_over_batch<T>(s.n, std::ssize(sums), sums.data(), [&](int64_t i, T* acc, T beta, std::vector<T>& col) {
    if (col.empty()) {
      col.resize(static_cast<std::size_t>(rows * s.spatial()));
      std::fill(col.begin() + s.k() * s.spatial(), col.end(), T(1));
    }
    for (int64_t g = 0; g < s.p.groups; ++g) {
      im2col(s, in + (i * s.c + g * s.cg()) * s.h * s.w, col.data(), s.spatial());
      const T* dy = grad_out + (i * s.o + g * s.og()) * s.spatial();
      if (block == 0) {
        blas_gemm<T>(false, true, rows, s.og(), s.spatial(), T(1), col.data(), s.spatial(), dy, s.spatial(), beta,
                     acc + g * rows * s.og(), s.og());
        continue;
      }
      for (int64_t j = 0; j < s.o / block; ++j) {
        blas_gemm<T>(false, false, rows, block, s.spatial(), T(1), col.data(), s.spatial(),
                     dy + j * s.spatial() * block, block, beta, acc + j * block, s.og());
      }
    }
  });
  for (int64_t g = 0; g < s.p.groups; ++g) {
    const T* sum = sums.data() + g * rows * s.og();
    for (int64_t oc = 0; oc < s.og(); ++oc) {
      T* dw = grad_weight + (g * s.og() + oc) * s.k();
      for (int64_t j = 0; j < s.k(); ++j) dw[j] = sum[j * s.og() + oc];
      if (grad_bias != nullptr) grad_bias[g * s.og() + oc] = sum[s.k() * s.og() + oc];
    }
  }
}

void check_blas_sizes(const char* op, const ConvShape& s) {
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  STRATA_CHECK(std::max({s.k(), s.spatial(), s.og()}) <= kMaxInt && s.k() * s.spatial() <= kMaxInt,
               NotImplementedError, "{}: a convolution whose patch matrix is {} x {} is too large for the CPU path",
               op, s.k(), s.spatial());
}

#if STRATA_HAVE_DNNL

// Note [oneDNN convolution primitives]
// f32 convolutions run on oneDNN. Our tensors are nchw / oihw; with those layouts forced, oneDNN picks its
// im2col + GEMM implementation, whereas letting it choose (format `any`) gives its direct kernels on blocked layouts
// (nChw16c, OIhw16i16o), which are faster even with a reorder in and out each call (docs/benchmarks.md,
// "Measurements behind the CPU decisions"). So each pass takes the layouts oneDNN prefers, reorders the arguments
// whose layout differs from ours, and writes the results back in ours. Creating primitives costs far more than
// running a small one, so a pass's primitive and its reorders are cached by everything that defines them (a model has
// few distinct convolution shapes).
constexpr std::size_t kPrimitiveCacheSize = 256;

enum class Pass : int64_t { Forward, BackwardData, BackwardWeight };

// Note [Weight gradients of thin convolutions]
// With few input channels (a network's first layer: 1 or 3 channels, a patch of k = C * kh * kw values) oneDNN
// 2.6's backward-weights is slow, about ten times slower than im2col + one small GEMM per image with the batch split
// over the threads. Which way round that GEMM goes matters to oneDNN's sgemm: dy col^T ([og, k] out) against col
// dy^T ([k, og] out) (docs/benchmarks.md, "Measurements behind the CPU decisions"), so the transposed product serves
// k < 16 or og <= 32, with a row of ones under the patches that gives the bias gradient in the same GEMM instead of
// a separate pass over dy. How thin is thin depends on the CPU. With AVX-512 the GEMM was measured ahead up to 27
// values (3 channels of 3x3), and no further. Without it, oneDNN's kernels work on blocks of 8 channels and are as
// slow for 4 to 7 channels as for 8, so the GEMM stays ahead up to 63 values (7 channels of 3x3) and is even with
// oneDNN at 8 channels.
constexpr int64_t kSmallPatchAvx512 = 27;
constexpr int64_t kSmallPatchAvx2 = 63;

int64_t small_patch() { return onednn_uses_avx512() ? kSmallPatchAvx512 : kSmallPatchAvx2; }

// Note [Winograd convolutions]
// 3x3 convolutions with stride 1 run on oneDNN's Winograd kernels (F(4x4, 3x3): each 6x6 input tile gives a 4x4 output
// tile with 36 instead of 144 multiplications per channel pair) where oneDNN 2.6 has them (AVX-512 only, so without it
// none is asked for; channel counts it can block) and there are enough tiles to go round the threads: about twice as
// fast as direct convolution on the reference network's layers and larger ones. The tile transforms are a fixed cost
// per 4x4 output tile that pays only with enough tiles: kWinogradTilesPerThread is where Winograd overtook direct
// convolution on small images. oneDNN pads channels to blocks of 16 and would take a network's 1-channel first layer
// too, 16 times over, about eight times slower than direct: hence kWinogradChannelBlock. The figures are in
// docs/benchmarks.md, "Measurements behind the CPU decisions". The results differ from direct convolution's by rounding
// only, but that rounding is at the scale of the operands rather than of each output (a 16-channel test case: 1.4e-5 at
// most for outputs up to 20; tests/nn/conv_test.cpp, WinogradSized...).
constexpr int64_t kWinogradTilesPerThread = 48;
constexpr int64_t kWinogradChannelBlock = 16;

bool winograd_suits(const ConvShape& s) {
  const ops::Conv2dParams& p = s.p;
  if (!onednn_uses_avx512() || s.kh != 3 || s.kw != 3 || p.stride_h != 1 || p.stride_w != 1 || p.dilation_h != 1 ||
      p.dilation_w != 1 || p.groups != 1 || s.c % kWinogradChannelBlock != 0 || s.o % kWinogradChannelBlock != 0) {
    return false;
  }
  const int64_t tiles = s.n * ((s.oh + 3) / 4) * ((s.ow + 3) / 4);
  return tiles >= kWinogradTilesPerThread * num_threads();
}

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// Our layout of an activation: NCHW, or oneDNN's nChw8c / nChw16c for the `_blocked` entries.
tag activation_tag(int64_t block) {
  switch (block) {
    case 0: return tag::nchw;
    case 8: return tag::nChw8c;
    case 16: return tag::nChw16c;
    default: STRATA_THROW(NotImplementedError, "conv2d: a channel block of {} is not supported (8 or 16)", block);
  }
}

// The block the `_blocked` entries take: the one oneDNN's direct convolutions use on this CPU (nChw16c with
// AVX-512, nChw8c with AVX2), so that a run of blocked layers meets no reorder (Note [Activations in oneDNN's
// blocked layout]).
int64_t conv_block_size(const ops::OpCall&) { return onednn_uses_avx512() ? 16 : 8; }

/// The memory descriptors of one convolution, in our layouts (`plain`) or left to oneDNN (`any`).
struct OneDnnConv {
  dnnl::memory::desc src, weights, bias, dst;
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
  dnnl::algorithm algorithm;

  OneDnnConv(const ConvShape& s, bool with_bias, bool plain,
             dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct)
      : src({s.n, s.c, s.h, s.w}, dt::f32, plain ? activation_tag(s.p.src_block) : tag::any),
        weights(s.p.groups == 1
                    ? dnnl::memory::desc({s.o, s.c, s.kh, s.kw}, dt::f32, plain ? tag::oihw : tag::any)
                    : dnnl::memory::desc({s.p.groups, s.og(), s.cg(), s.kh, s.kw}, dt::f32, plain ? tag::goihw : tag::any)),
        bias(with_bias ? dnnl::memory::desc({s.o}, dt::f32, tag::x) : dnnl::memory::desc()),
        dst({s.n, s.o, s.oh, s.ow}, dt::f32, plain ? activation_tag(s.p.dst_block) : tag::any),
        strides{s.p.stride_h, s.p.stride_w},
        dilates{s.p.dilation_h - 1, s.p.dilation_w - 1},  // oneDNN counts the gaps: 0 is a dense kernel
        pad_l{s.p.pad_h, s.p.pad_w},
        pad_r{s.p.pad_h, s.p.pad_w},
        algorithm(algorithm) {}

  /// Our layout of an argument of any pass.
  const dnnl::memory::desc& of(int arg) const {
    switch (arg) {
      case DNNL_ARG_SRC:
      case DNNL_ARG_DIFF_SRC: return src;
      case DNNL_ARG_WEIGHTS:
      case DNNL_ARG_DIFF_WEIGHTS: return weights;
      case DNNL_ARG_BIAS:
      case DNNL_ARG_DIFF_BIAS: return bias;
      default: return dst;
    }
  }

  /// Scratchpads come from our caching allocator (OneDnnCall), not from fresh pages per call.
  static dnnl::primitive_attr attr() {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }

  dnnl::convolution_forward::primitive_desc forward(bool relu) const {
    dnnl::primitive_attr attr = OneDnnConv::attr();
    if (relu) {
      dnnl::post_ops post;
      post.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(post);
    }
    return {{dnnl::prop_kind::forward_training, algorithm, src, weights, bias, dst, strides, dilates, pad_l, pad_r},
            attr,
            cpu_engine()};
  }
  dnnl::convolution_backward_data::primitive_desc backward_data() const {
    return {{algorithm, src, weights, dst, strides, dilates, pad_l, pad_r},
            attr(),
            cpu_engine(),
            forward(false)};
  }
  dnnl::convolution_backward_weights::primitive_desc backward_weight() const {
    return {{algorithm, src, weights, bias, dst, strides, dilates, pad_l, pad_r},
            attr(),
            cpu_engine(),
            forward(false)};
  }
};

/// An argument that the primitive wants in another layout than ours, and the reorder between the two.
struct Relayout {
  int arg;
  bool output;
  dnnl::memory::desc inner;
  dnnl::reorder reorder;
};

struct CachedPass {
  dnnl::primitive primitive;
  dnnl::memory::desc scratchpad;
  std::vector<Relayout> relayouts;
};

bool is_output(int arg) {
  return arg == DNNL_ARG_DST || arg == DNNL_ARG_DIFF_SRC || arg == DNNL_ARG_DIFF_WEIGHTS || arg == DNNL_ARG_DIFF_BIAS;
}

template <typename Primitive>
CachedPass make_pass(const typename Primitive::primitive_desc& pd, const OneDnnConv& plain,
                     std::initializer_list<int> args) {
  CachedPass pass{Primitive(pd), pd.scratchpad_desc(), {}};
  for (const int arg : args) {
    const dnnl::memory::desc inner = pd.query_md(dnnl::query::exec_arg_md, arg);
    const dnnl::memory::desc& ours = plain.of(arg);
    if (inner == ours) continue;
    const bool output = is_output(arg);
    pass.relayouts.push_back(
        {arg, output, inner,
         dnnl::reorder(output ? dnnl::reorder::primitive_desc(cpu_engine(), inner, cpu_engine(), ours)
                              : dnnl::reorder::primitive_desc(cpu_engine(), ours, cpu_engine(), inner))});
  }
  return pass;
}

CachedPass make_pass(const ConvShape& s, Pass pass, bool with_bias, dnnl::algorithm algorithm) {
  const OneDnnConv any(s, with_bias, false, algorithm), plain(s, with_bias, true);
  switch (pass) {
    case Pass::Forward:
      return make_pass<dnnl::convolution_forward>(any.forward(s.p.relu), plain,
                                                  {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST});
    case Pass::BackwardData:
      return make_pass<dnnl::convolution_backward_data>(any.backward_data(), plain,
                                                        {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC});
    case Pass::BackwardWeight:
      return make_pass<dnnl::convolution_backward_weights>(any.backward_weight(), plain,
                                                           {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS});
  }
  STRATA_THROW(BackendError, "conv2d: unknown oneDNN pass {}", static_cast<int>(pass));
}

CachedPass cached_pass(const ConvShape& s, Pass pass, bool with_bias) {
  using Key = std::array<int64_t, 21>;
  const ops::Conv2dParams& p = s.p;
  // oneDNN fixes a primitive's threads when it is made (Note [Fewer threads while other processes hold the cores]).
  // The weight gradient's sum over the batch is split over them; Winograd's blocking was not shown to be the same on
  // any count. The choice of Winograd takes num_threads(), so that the algorithm, and its rounding, never follows the
  // load either.
  const bool winograd = winograd_suits(s);
  const int threads = threads_for_work(pass == Pass::BackwardWeight || winograd);
  const Key key{static_cast<int64_t>(pass), s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, p.stride_h, p.stride_w, p.pad_h,
                p.pad_w, p.dilation_h, p.dilation_w, p.groups, with_bias, pass == Pass::Forward && p.relu, winograd,
                p.src_block, p.dst_block, threads};
  static std::mutex mutex;
  static std::map<Key, CachedPass> cache;
  [[maybe_unused]] static const bool held = (hold_across_fork(mutex), true);
  {
    std::lock_guard lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  CachedPass made;
  const auto creating = creation_lock();
  try {
    made = make_pass(s, pass, with_bias,
                     winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct);
  } catch (const dnnl::error& e) {
    // Note [Winograd convolutions]: where oneDNN has no Winograd kernel for this pass, the direct one.
    if (!winograd || e.status != dnnl_unimplemented) throw;
    made = make_pass(s, pass, with_bias, dnnl::algorithm::convolution_direct);
  }
  std::lock_guard lock(mutex);
  if (cache.size() >= kPrimitiveCacheSize) cache.clear();
  cache.emplace(key, made);
  return made;
}

using Args = std::vector<std::pair<int, const TensorView*>>;

// The oneDNN side of one kernel call (Note [oneDNN convolution primitives]): its passes run on this thread's stream
// with buffers (scratchpads, arguments relaid out) from the caching allocator, which live until the call ends.
// oneDNN's own buffers would be fresh pages on every call, whose first touch costs more than the convolution. An
// input that two passes want in the same layout (the backward's grad_output, for backward-data and backward-weights)
// is relaid out once.
class OneDnnCall {
 public:
  explicit OneDnnCall(const ops::OpCall& call) : op_(call.op), device_(call.device) {}

  /// A blocked activation (`block` > 0) as NCHW, in a buffer that lives as long as this call; NCHW as it is.
  const float* nchw(const TensorView& v, int64_t block, const dnnl::memory::dims& dims) {
    if (block == 0) return v.ptr<float>();
    try {
      const dnnl::memory::desc from(dims, dt::f32, activation_tag(block)), to(dims, dt::f32, tag::nchw);
      dnnl::memory source(from, cpu_engine(), v.ptr<float>());
      dnnl::memory plain = buffer(to);
      dnnl::reorder(source, plain).execute(stream(), source, plain);
      stream().wait();
      return static_cast<const float*>(plain.get_data_handle());
    } catch (const dnnl::error& e) {
      STRATA_THROW(BackendError, "{}: oneDNN reorder failed: {} (status {})", op_, e.what(),
                   static_cast<int>(e.status));
    }
  }

  /// Runs one pass; `args` maps oneDNN argument ids to our views.
  void run(const ConvShape& s, Pass pass, bool with_bias, const Args& args) {
    try {
      const CachedPass cached = cached_pass(s, pass, with_bias);
      const OneDnnConv plain(s, with_bias, true);
      std::unordered_map<int, dnnl::memory> memories, ours;
      for (const auto& [id, view] : args) {
        ours.emplace(id, dnnl::memory(plain.of(id), cpu_engine(), view->ptr<float>()));
      }
      memories = ours;
      if (cached.scratchpad.get_size() != 0) memories[DNNL_ARG_SCRATCHPAD] = buffer(cached.scratchpad);
      for (const Relayout& r : cached.relayouts) {
        memories[r.arg] = r.output ? buffer(r.inner) : relaid_input(r, ours.at(r.arg));
      }
      cached.primitive.execute(stream(), memories);
      for (const Relayout& r : cached.relayouts) {
        if (r.output) r.reorder.execute(stream(), memories.at(r.arg), ours.at(r.arg));
      }
      stream().wait();
    } catch (const dnnl::error& e) {
      STRATA_THROW(BackendError, "{}: oneDNN convolution failed: {} (status {})", op_, e.what(),
                   static_cast<int>(e.status));
    }
  }

 private:
  static dnnl::stream& stream() {
    thread_local dnnl::stream stream(cpu_engine());
    return stream;
  }

  dnnl::memory buffer(const dnnl::memory::desc& desc) {
    buffers_.push_back(allocate(device_, desc.get_size()));  // the call's device: a virtual one has its own memory
    return dnnl::memory(desc, cpu_engine(), buffers_.back().get());
  }

  // `ours` in the layout r.inner: relaid out now, or earlier in this call by another pass.
  dnnl::memory relaid_input(const Relayout& r, dnnl::memory ours) {
    const void* data = ours.get_data_handle();
    for (const auto& [from, to] : relaid_) {
      if (from == data && to.get_desc() == r.inner) return to;
    }
    dnnl::memory inner = buffer(r.inner);
    r.reorder.execute(stream(), ours, inner);
    relaid_.emplace_back(data, inner);
    return inner;
  }

  const char* op_;
  Device device_;
  std::vector<DataPtr> buffers_;
  std::vector<std::pair<const void*, dnnl::memory>> relaid_;
};

#endif

[[noreturn]] void unsupported(const char* op, DType dtype) {
  STRATA_THROW(DTypeError, "{}: {} convolutions are not supported on the CPU; convert with .to(DType::F32)", op,
               dtype);
}

void check_blocked_dtype(const ops::OpCall& call, const ops::Conv2dParams& p, DType dtype) {
  STRATA_CHECK((p.src_block == 0 && p.dst_block == 0) || dtype == DType::F32, DTypeError,
               "{}: blocked layouts are for f32 convolutions, got {}", call.op, dtype);
}

void conv2d_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& input, const TensorView& weight,
                   const TensorView& bias, const ops::Conv2dParams& p) {
  check_blocked_dtype(call, p, input.dtype);
  const ConvShape s = conv_shape(input, weight, out, p);
  const bool with_bias = bias.data != nullptr;
  switch (input.dtype) {
#if STRATA_HAVE_DNNL
    case DType::F32: {
      Args args{{DNNL_ARG_SRC, &input}, {DNNL_ARG_WEIGHTS, &weight}, {DNNL_ARG_DST, &out}};
      if (with_bias) args.emplace_back(DNNL_ARG_BIAS, &bias);
      return OneDnnCall(call).run(s, Pass::Forward, with_bias, args);
    }
#else
    case DType::F32:
      check_blas_sizes(call.op, s);
      return gemm_forward<float>(s, out.ptr<float>(), input.ptr<float>(), weight.ptr<float>(),
                                 with_bias ? bias.ptr<float>() : nullptr);
#endif
    case DType::F64:
      check_blas_sizes(call.op, s);
      return gemm_forward<double>(s, out.ptr<double>(), input.ptr<double>(), weight.ptr<double>(),
                                  with_bias ? bias.ptr<double>() : nullptr);
    default: unsupported(call.op, input.dtype);
  }
}

// im2col + BLAS for both gradients.
template <typename T>
void gemm_backward(const ConvShape& s, const TensorView& grad_input, const TensorView& grad_weight,
                   const TensorView& grad_bias, const TensorView& grad_output, const TensorView& input,
                   const TensorView& weight) {
  if (grad_input.data != nullptr) {
    gemm_backward_data<T>(s, grad_input.ptr<T>(), grad_output.ptr<T>(), weight.ptr<T>());
  }
  if (grad_weight.data != nullptr) {
    gemm_backward_weight<T>(s, grad_weight.ptr<T>(), grad_bias.data != nullptr ? grad_bias.ptr<T>() : nullptr,
                            input.ptr<T>(), grad_output.ptr<T>());
  }
}

void conv2d_backward_kernel(const ops::OpCall& call, const TensorView& grad_input, const TensorView& grad_weight,
                            const TensorView& grad_bias, const TensorView& grad_output, const TensorView& input,
                            const TensorView& weight, const ops::Conv2dParams& p) {
  check_blocked_dtype(call, p, input.dtype);
  const ConvShape s = conv_shape(input, weight, grad_output, p);
  switch (input.dtype) {
#if STRATA_HAVE_DNNL
    case DType::F32: {
      // One OneDnnCall for both passes: grad_output is relaid out once.
      OneDnnCall onednn(call);
      if (grad_input.data != nullptr) {
        onednn.run(s, Pass::BackwardData, false,
                   {{DNNL_ARG_DIFF_DST, &grad_output}, {DNNL_ARG_WEIGHTS, &weight}, {DNNL_ARG_DIFF_SRC, &grad_input}});
      }
      if (grad_weight.data == nullptr) return;
      const bool with_bias = grad_bias.data != nullptr;
      if (s.k() <= small_patch() && s.p.src_block == 0) {
        // Note [Weight gradients of thin convolutions]. The transposed product reads a blocked grad_output (the
        // first layer of a blocked run) as it is; the other is relaid out to NCHW for it.
        float* dw = grad_weight.ptr<float>();
        float* db = with_bias ? grad_bias.ptr<float>() : nullptr;
        const bool transposed = s.k() < 16 || s.og() <= 32;
        if (transposed && s.p.groups == 1) {
          return gemm_backward_weight_transposed<float>(s, dw, db, input.ptr<float>(), grad_output.ptr<float>());
        }
        ConvShape plain = s;
        plain.p.dst_block = 0;
        const float* dy = onednn.nchw(grad_output, s.p.dst_block, {s.n, s.o, s.oh, s.ow});
        return (transposed ? gemm_backward_weight_transposed<float> : gemm_backward_weight<float>)(
            plain, dw, db, input.ptr<float>(), dy);
      }
      Args args{{DNNL_ARG_SRC, &input}, {DNNL_ARG_DIFF_DST, &grad_output}, {DNNL_ARG_DIFF_WEIGHTS, &grad_weight}};
      if (with_bias) args.emplace_back(DNNL_ARG_DIFF_BIAS, &grad_bias);
      return onednn.run(s, Pass::BackwardWeight, with_bias, args);
    }
#else
    case DType::F32:
      check_blas_sizes(call.op, s);
      return gemm_backward<float>(s, grad_input, grad_weight, grad_bias, grad_output, input, weight);
#endif
    case DType::F64:
      check_blas_sizes(call.op, s);
      return gemm_backward<double>(s, grad_input, grad_weight, grad_bias, grad_output, input, weight);
    default: unsupported(call.op, input.dtype);
  }
}

}  // namespace

STRATA_REGISTER_KERNEL("conv2d", CPU, Conv2dFn, conv2d_kernel);
STRATA_REGISTER_KERNEL("conv2d_backward", CPU, Conv2dBackwardFn, conv2d_backward_kernel);
#if STRATA_HAVE_DNNL
// The same kernels read src_block and dst_block (Note [The DNN kernel contract]); f32 only, as oneDNN's.
STRATA_REGISTER_KERNEL("conv2d_blocked", CPU, Conv2dFn, conv2d_kernel);
STRATA_REGISTER_KERNEL("conv2d_blocked_backward", CPU, Conv2dBackwardFn, conv2d_backward_kernel);
STRATA_REGISTER_KERNEL("conv2d_block_size", CPU, ConvBlockFn, conv_block_size);
#endif

}  // namespace strata::cpu
