// The fused scaled_dot_product_attention of the CPU, forward and backward (Note [The attention kernel contract] in
// ops/attention_kernels.h), after FlashAttention-2 (Dao, 2023).

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "strata/backends/portable/elementwise_math.h"
#include "strata/backends/portable/philox.h"
#include "strata/core/error.h"
#include "strata/ops/attention_kernels.h"
#include "strata/runtime/parallel.h"

namespace strata::cpu {

namespace {

// Note [Blocks of the CPU's attention]
// A task is one block of kRows query rows of one batch entry (B * ceil(L / kRows) tasks over the pool). It walks
// the keys in blocks of kCols: the kRows x kCols scores of a block come from one small GEMM (OpenBLAS on the
// calling thread, Note [One CPU thread pool]) into the thread's scratch block, are masked, exponentiated against
// the running row maximum (online softmax: the output rows accumulated so far are rescaled when the maximum grows),
// and a second GEMM adds P V to the output rows. So a thread holds one scores block (16 KiB in f32), never the
// L x S scores, and each row's log-sum-exp is kept for the backward pass, which recomputes P = exp(s - lse) block
// by block instead of storing it. Under is_causal a key block that lies wholly above the diagonal is skipped, the
// blocks are square so that about half of them are. 64 x 64 keeps the GEMMs large enough for OpenBLAS's kernels
// (nanoGPT's T = 64, head dim 32 is one block per head) and the scratch in L1/L2; nothing finer was measured.
// The backward pass is one task per batch entry (a batch entry x head of a Transformer: 48 at nanoGPT's CPU
// shape), since the key gradients sum over every query block: a task owns its entry's gradients and needs no
// reduction between threads, at the price of fewer tasks when B is below the thread count.
constexpr int64_t kRows = 64;
constexpr int64_t kCols = 64;

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

/// s[c] = exp(s[c] - shift) for c in [0, n): a loop g++ vectorises in f32 through libmvec (Note [Vector math from
/// libmvec]), 4 values a call, where std::exp was one scalar call per score.
template <typename T>
void exp_shifted(T* s, int64_t n, T shift) {
  for (int64_t c = 0; c < n; ++c) s[c] = portable::fmath::exp(s[c] - shift);
}

/// Keys of block [j0, j0 + cols) that query row i may see under a causal mask (the rest are -inf: their exp is 0).
inline int64_t causal_cols(bool causal, int64_t i, int64_t j0, int64_t cols) {
  return causal ? std::clamp<int64_t>(i + 1 - j0, 0, cols) : cols;
}

/// The mask and dropout of one problem, applied to rows of a scores block.
template <typename T>
struct Masking {
  const ops::AttentionParams& p;
  const void* mask;
  float dropout_p;
  T keep_scale;

  Masking(const ops::AttentionParams& params, const TensorView& mask_view)
      : p(params),
        mask(mask_view.data == nullptr ? nullptr : static_cast<const char*>(mask_view.data)),
        dropout_p(static_cast<float>(params.dropout_p)),
        keep_scale(static_cast<T>(1.0 / (1.0 - params.dropout_p))) {
    if (mask != nullptr) {
      const std::size_t bytes = mask_view.dtype == DType::Bool ? 1 : sizeof(T);
      mask = static_cast<const char*>(mask) + mask_view.offset * static_cast<int64_t>(bytes);
    }
  }

  /// Scores s[0, cols) of query row i against keys j0.. of batch entry b: -inf where masked, plus an additive mask.
  void apply(T* s, int64_t b, int64_t i, int64_t j0, int64_t cols) const {
    constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
    if (p.causal) {
      for (int64_t c = std::max<int64_t>(0, i + 1 - j0); c < cols; ++c) s[c] = kMinusInf;
    } else if (p.mask_kind == ops::AttentionMask::kBool) {
      const auto* m = static_cast<const bool*>(mask) + p.mask_offset(b) + i * p.mask_row_stride;
      for (int64_t c = 0; c < cols; ++c) {
        if (!m[(j0 + c) * p.mask_col_stride]) s[c] = kMinusInf;
      }
    } else if (p.mask_kind == ops::AttentionMask::kAdditive) {
      const T* m = static_cast<const T*>(mask) + p.mask_offset(b) + i * p.mask_row_stride;
      for (int64_t c = 0; c < cols; ++c) s[c] += m[(j0 + c) * p.mask_col_stride];
    }
  }

  /// keep[0, cols): whether dropout keeps probability (b, i, j0 + c), from the Philox stream as rand() draws it.
  void keep(unsigned char* out, int64_t b, int64_t i, int64_t j0, int64_t cols) const {
    const auto first = static_cast<std::uint64_t>((b * p.L + i) * p.S + j0);
    std::uint64_t block = ~std::uint64_t{0};
    portable::PhiloxBlock words{};
    for (int64_t c = 0; c < cols; ++c) {
      const std::uint64_t n = first + static_cast<std::uint64_t>(c);
      if (n / 4 != block) {
        block = n / 4;
        words = portable::philox_block(p.seed, p.offset + block);
      }
      out[c] = portable::uniform_f32(words.w[n % 4]) >= dropout_p ? 1 : 0;
    }
  }
};

template <typename T>
void forward(const ops::OpCall&, const TensorView& out_view, const TensorView& lse_view, const TensorView& q_view,
             const TensorView& k_view, const TensorView& v_view, const TensorView& mask_view,
             const ops::AttentionParams& p) {
  const T* q = q_view.ptr<T>();
  const T* k = k_view.ptr<T>();
  const T* v = v_view.ptr<T>();
  T* out = out_view.ptr<T>();
  T* lse = lse_view.ptr<T>();
  const Masking<T> masking(p, mask_view);
  const int64_t L = p.L, S = p.S, E = p.E, Ev = p.Ev;
  const int64_t row_blocks = (L + kRows - 1) / kRows;
  const T scale = static_cast<T>(p.scale);
  parallel_for(p.batch * row_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> scores(kRows * kCols), row_max(kRows), row_sum(kRows);
    std::vector<unsigned char> keep(kCols);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / row_blocks, i0 = (task % row_blocks) * kRows;
      const int64_t rows = std::min(kRows, L - i0);
      const T* qb = q + (b * L + i0) * E;
      T* acc = out + (b * L + i0) * Ev;
      std::fill(acc, acc + rows * Ev, T(0));
      std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<T>::infinity());
      std::fill(row_sum.begin(), row_sum.end(), T(0));
      const int64_t key_end = p.causal ? std::min(S, i0 + rows) : S;  // later key blocks are all above the diagonal
      for (int64_t j0 = 0; j0 < key_end; j0 += kCols) {
        const int64_t cols = std::min(kCols, key_end - j0);
        gemm(false, true, rows, cols, E, scale, qb, E, k + (b * S + j0) * E, E, T(0), scores.data(), kCols);
        for (int64_t r = 0; r < rows; ++r) {
          T* s = scores.data() + r * kCols;
          masking.apply(s, b, i0 + r, j0, cols);
          T block_max = -std::numeric_limits<T>::infinity();
          for (int64_t c = 0; c < cols; ++c) block_max = std::max(block_max, s[c]);
          const T new_max = std::max(row_max[r], block_max);
          if (new_max == -std::numeric_limits<T>::infinity()) {  // no key of this row is allowed so far
            std::fill(s, s + cols, T(0));
            continue;
          }
          const int64_t seen = causal_cols(p.causal, i0 + r, j0, cols);
          exp_shifted(s, seen, new_max);
          std::fill(s + seen, s + cols, T(0));
          T sum = 0;
          for (int64_t c = 0; c < seen; ++c) sum += s[c];
          const T alpha = std::exp(row_max[r] - new_max);  // 0 while the row had no allowed key
          row_sum[r] = row_sum[r] * alpha + sum;
          row_max[r] = new_max;
          if (alpha != T(1)) {
            T* a = acc + r * Ev;
            for (int64_t e = 0; e < Ev; ++e) a[e] *= alpha;
          }
          if (p.dropout_p > 0.0) {
            masking.keep(keep.data(), b, i0 + r, j0, cols);
            for (int64_t c = 0; c < cols; ++c) s[c] = keep[c] ? s[c] * masking.keep_scale : T(0);
          }
        }
        gemm(false, false, rows, Ev, cols, T(1), scores.data(), kCols, v + (b * S + j0) * Ev, Ev, T(1), acc, Ev);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* a = acc + r * Ev;
        if (row_sum[r] == T(0)) {  // every key masked: zeros (the accumulator is), and an lse of -inf
          lse[b * L + i0 + r] = -std::numeric_limits<T>::infinity();
          continue;
        }
        const T inv = T(1) / row_sum[r];
        for (int64_t e = 0; e < Ev; ++e) a[e] *= inv;
        lse[b * L + i0 + r] = row_max[r] + std::log(row_sum[r]);
      }
    }
  });
}

template <typename T>
void backward(const ops::OpCall&, const TensorView& gq_view, const TensorView& gk_view, const TensorView& gv_view,
              const TensorView& go_view, const TensorView& q_view, const TensorView& k_view, const TensorView& v_view,
              const TensorView& out_view, const TensorView& lse_view, const TensorView& mask_view,
              const ops::AttentionParams& p) {
  const T* q = q_view.ptr<T>();
  const T* k = k_view.ptr<T>();
  const T* v = v_view.ptr<T>();
  const T* out = out_view.ptr<T>();
  const T* go = go_view.ptr<T>();
  const T* lse = lse_view.ptr<T>();
  T* gq = gq_view.ptr<T>();
  T* gk = gk_view.ptr<T>();
  T* gv = gv_view.ptr<T>();
  const Masking<T> masking(p, mask_view);
  const int64_t L = p.L, S = p.S, E = p.E, Ev = p.Ev;
  const T scale = static_cast<T>(p.scale);
  const bool dropout = p.dropout_p > 0.0;
  parallel_for(p.batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> probs(kRows * kCols), grads(kRows * kCols), dropped(dropout ? kRows * kCols : 0), delta(L);
    std::vector<unsigned char> keep(kCols);
    for (int64_t b = begin; b < end; ++b) {
      std::fill(gq + b * L * E, gq + (b + 1) * L * E, T(0));
      std::fill(gk + b * S * E, gk + (b + 1) * S * E, T(0));
      std::fill(gv + b * S * Ev, gv + (b + 1) * S * Ev, T(0));
      // delta_i = sum_e dO_ie O_ie = sum_j P_ij dP_ij (FlashAttention-2's D), also with dropout.
      for (int64_t i = 0; i < L; ++i) {
        const T* o = out + (b * L + i) * Ev;
        const T* g = go + (b * L + i) * Ev;
        T d = 0;
        for (int64_t e = 0; e < Ev; ++e) d += o[e] * g[e];
        delta[i] = d;
      }
      for (int64_t i0 = 0; i0 < L; i0 += kRows) {
        const int64_t rows = std::min(kRows, L - i0);
        const T* qb = q + (b * L + i0) * E;
        const T* gob = go + (b * L + i0) * Ev;
        const int64_t key_end = p.causal ? std::min(S, i0 + rows) : S;
        for (int64_t j0 = 0; j0 < key_end; j0 += kCols) {
          const int64_t cols = std::min(kCols, key_end - j0);
          const T* kb = k + (b * S + j0) * E;
          const T* vb = v + (b * S + j0) * Ev;
          gemm(false, true, rows, cols, E, scale, qb, E, kb, E, T(0), probs.data(), kCols);
          // grads = dO V^T: the gradient of the dropped probabilities.
          gemm(false, true, rows, cols, Ev, T(1), gob, Ev, vb, Ev, T(0), grads.data(), kCols);
          for (int64_t r = 0; r < rows; ++r) {
            T* s = probs.data() + r * kCols;
            T* g = grads.data() + r * kCols;
            masking.apply(s, b, i0 + r, j0, cols);
            const T row_lse = lse[b * L + i0 + r];
            if (row_lse == -std::numeric_limits<T>::infinity()) {
              std::fill(s, s + cols, T(0));
            } else {
              const int64_t seen = causal_cols(p.causal, i0 + r, j0, cols);
              exp_shifted(s, seen, row_lse);
              std::fill(s + seen, s + cols, T(0));
            }
            if (dropout) {
              T* d = dropped.data() + r * kCols;
              masking.keep(keep.data(), b, i0 + r, j0, cols);
              for (int64_t c = 0; c < cols; ++c) {
                d[c] = keep[c] ? s[c] * masking.keep_scale : T(0);
                g[c] = keep[c] ? g[c] * masking.keep_scale : T(0);
              }
            }
          }
          // dV += P_dropped^T dO
          gemm(true, false, cols, Ev, rows, T(1), dropout ? dropped.data() : probs.data(), kCols, gob, Ev, T(1),
               gv + (b * S + j0) * Ev, Ev);
          // dS = P (dP - delta), in grads
          for (int64_t r = 0; r < rows; ++r) {
            const T* s = probs.data() + r * kCols;
            T* g = grads.data() + r * kCols;
            const T d = delta[i0 + r];
            for (int64_t c = 0; c < cols; ++c) g[c] = s[c] * (g[c] - d);
          }
          gemm(false, false, rows, E, cols, scale, grads.data(), kCols, kb, E, T(1), gq + (b * L + i0) * E, E);
          gemm(true, false, cols, E, rows, scale, grads.data(), kCols, qb, E, T(1), gk + (b * S + j0) * E, E);
        }
      }
    }
  });
}

void attention_forward(const ops::OpCall& call, const TensorView& out, const TensorView& lse, const TensorView& q,
                       const TensorView& k, const TensorView& v, const TensorView& mask,
                       const ops::AttentionParams& p) {
  switch (q.dtype) {
    case DType::F32: return forward<float>(call, out, lse, q, k, v, mask, p);
    case DType::F64: return forward<double>(call, out, lse, q, k, v, mask, p);
    default: STRATA_THROW(DTypeError, "{}: the CPU kernel takes f32 or f64, got {}", call.op, q.dtype);
  }
}

void attention_backward(const ops::OpCall& call, const TensorView& gq, const TensorView& gk, const TensorView& gv,
                        const TensorView& go, const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& out, const TensorView& lse, const TensorView& mask,
                        const ops::AttentionParams& p) {
  switch (q.dtype) {
    case DType::F32: return backward<float>(call, gq, gk, gv, go, q, k, v, out, lse, mask, p);
    case DType::F64: return backward<double>(call, gq, gk, gv, go, q, k, v, out, lse, mask, p);
    default: STRATA_THROW(DTypeError, "{}: the CPU kernel takes f32 or f64, got {}", call.op, q.dtype);
  }
}

}  // namespace

STRATA_REGISTER_KERNEL_WITH_DTYPES("scaled_dot_product_attention", CPU, AttentionForwardFn, attention_forward,
                                   (ops::DTypeSet{DType::F32, DType::F64}));
STRATA_REGISTER_KERNEL_WITH_DTYPES("scaled_dot_product_attention_backward", CPU, AttentionBackwardFn,
                                   attention_backward, (ops::DTypeSet{DType::F32, DType::F64}));

}  // namespace strata::cpu
