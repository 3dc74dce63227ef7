#pragma once

// scaled_dot_product_attention as block kernels (Note [Block kernels]): the GPU's implementation, registered by
// backends/cuda/attention.cu (nvcc, and hipcc for AMD). A .cpp file that includes this header runs the same kernels
// on the CPU's block emulation, which is how tests/nn/attention_blocks_test.cpp checks them without a GPU; the CPU
// backend itself uses backends/cpu/attention.cpp.

#include <algorithm>
#include <cstdint>

#include "strata/backends/portable/launch_site.h"
#include "strata/backends/portable/philox.h"
#include "strata/backends/portable/reduce_accumulators.h"
#include "strata/core/error.h"
#include "strata/kernels/block_launch.h"
#include "strata/ops/attention_kernels.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

namespace attention_detail {

// Note [The attention block kernels]
// Flash-style, written plainly rather than tuned: cuDNN's fused attention needs its graph API (a frontend that is
// not here) and so does not serve yet. A block owns a tile of `tile` query rows, one thread per row, and walks the
// keys in tiles of as many keys staged in shared memory with the values; each thread keeps its row's running
// maximum and sum (online softmax) and its output row in shared memory, so nothing of the L x S scores reaches
// global memory. The backward pass is two kernels without atomics: one per query tile for dQ, one per key tile
// (one thread per key) for dK and dV; both recompute the probabilities from the saved log-sum-exp, the
// dropout mask from the Philox counter (Note [The attention kernel contract]), and delta_i = dO_i . O_i. Tiles are
// 64 rows, halved until a kernel's shared memory fits 48 KiB (what every GPU gives without opting in, AMD's 64 KiB
// included), down to 16.

inline constexpr int64_t kMaxTile = 64, kMinTile = 16;
inline constexpr std::size_t kSharedBudget = 48 * 1024;

// Shared memory of the kernels, in elements, for a tile of t rows (queries or keys) and head dims e, ev.
inline int64_t forward_elems(int64_t t, int64_t e, int64_t ev) { return t * e + t * e + t * ev + t * ev + t * t; }
inline int64_t dq_elems(int64_t t, int64_t e, int64_t ev) { return t * e + t * ev + t * e + t * ev + t * e; }
inline int64_t dkv_elems(int64_t t, int64_t e, int64_t ev) {
  return t * e + t * ev + t * e + t * ev + 2 * t + t * e + t * ev;
}

inline int64_t pick_tile(int64_t e, int64_t ev, std::size_t element) {
  int64_t t = kMaxTile;
  while (t > kMinTile &&
         static_cast<std::size_t>(std::max({forward_elems(t, e, ev), dq_elems(t, e, ev), dkv_elems(t, e, ev)})) *
                 element >
             kSharedBudget) {
    t /= 2;
  }
  return t;
}

template <typename T>
STRATA_HOST_DEVICE inline T minus_inf() {
  return -math::inf<T>();
}

/// Score s of query i and key j with the mask applied (-inf where masked); moff is the mask's offset of entry b.
template <typename T>
STRATA_HOST_DEVICE inline T masked(T s, const ops::AttentionParams& p, const void* mask, int64_t moff, int64_t i,
                                   int64_t j) {
  if (p.causal) return j > i ? minus_inf<T>() : s;
  if (p.mask_kind == ops::AttentionMask::kBool) {
    return static_cast<const bool*>(mask)[moff + i * p.mask_row_stride + j * p.mask_col_stride] ? s : minus_inf<T>();
  }
  if (p.mask_kind == ops::AttentionMask::kAdditive) {
    return s + static_cast<const T*>(mask)[moff + i * p.mask_row_stride + j * p.mask_col_stride];
  }
  return s;
}

/// Whether dropout keeps probability (b, i, j): the f32 uniform of element (b * L + i) * S + j of the stream.
STRATA_HOST_DEVICE inline bool kept(const ops::AttentionParams& p, int64_t b, int64_t i, int64_t j) {
  const auto n = static_cast<std::uint64_t>((b * p.L + i) * p.S + j);
  const PhiloxBlock w = philox_block(p.seed, p.offset + n / 4);
  return uniform_f32(w.w[n % 4]) >= static_cast<float>(p.dropout_p);
}

template <typename T>
STRATA_HOST_DEVICE inline T dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t e = 0; e < n; ++e) s += a[e] * b[e];
  return s;
}

inline const void* mask_data(const TensorView& mask, std::size_t element) {
  if (mask.data == nullptr) return nullptr;
  const std::size_t bytes = mask.dtype == DType::Bool ? 1 : element;
  return static_cast<const char*>(mask.data) + mask.offset * static_cast<int64_t>(bytes);
}

template <typename T>
void forward(const ops::OpCall& call, const TensorView& out_view, const TensorView& lse_view, const TensorView& q_view,
             const TensorView& k_view, const TensorView& v_view, const TensorView& mask_view,
             const ops::AttentionParams& p) {
  const int64_t L = p.L, S = p.S, E = p.E, Ev = p.Ev, t = pick_tile(E, Ev, sizeof(T));
  const T* q = q_view.ptr<T>();
  const T* k = k_view.ptr<T>();
  const T* v = v_view.ptr<T>();
  T* out = out_view.ptr<T>();
  T* lse = lse_view.ptr<T>();
  const void* mask = mask_data(mask_view, sizeof(T));
  const T scale = static_cast<T>(p.scale), keep_scale = static_cast<T>(1.0 / (1.0 - p.dropout_p));
  const bool dropout = p.dropout_p > 0.0;
  const auto grid_x = static_cast<std::uint32_t>((L + t - 1) / t);
  kernels::launch_block(
      site_of(call, "attention_forward"), {grid_x, static_cast<std::uint32_t>(p.batch)},
      {static_cast<std::uint32_t>(t)}, static_cast<std::size_t>(forward_elems(t, E, Ev)) * sizeof(T),
      STRATA_BLOCK_KERNEL(ctx) {
        T* qs = ctx.dynamic_shared<T>();
        T* ks = qs + t * E;
        T* vs = ks + t * E;
        T* acc = vs + t * Ev;
        T* ss = acc + t * Ev;
        const int64_t r = ctx.idx.thread.x, b = ctx.idx.block.y, i0 = static_cast<int64_t>(ctx.idx.block.x) * t;
        const int64_t i = i0 + r;
        const bool active = i < L;
        const int64_t moff = mask == nullptr ? 0 : p.mask_offset(b);
        for (int64_t x = r; x < t * E; x += t) qs[x] = i0 + x / E < L ? q[(b * L + i0) * E + x] : T(0);
        for (int64_t e = 0; e < Ev; ++e) acc[r * Ev + e] = T(0);
        T m = minus_inf<T>(), l = 0;
        const int64_t rows_end = i0 + t < L ? i0 + t : L;
        const int64_t key_end = p.causal && rows_end < S ? rows_end : S;
        for (int64_t j0 = 0; j0 < key_end; j0 += t) {
          const int64_t cols = key_end - j0 < t ? key_end - j0 : t;
          STRATA_SYNCTHREADS();  // the previous tile is used up
          for (int64_t x = r; x < cols * E; x += t) ks[x] = k[(b * S + j0) * E + x];
          for (int64_t x = r; x < cols * Ev; x += t) vs[x] = v[(b * S + j0) * Ev + x];
          STRATA_SYNCTHREADS();
          if (!active) continue;
          T* s = ss + r * t;
          T tile_max = minus_inf<T>();
          for (int64_t c = 0; c < cols; ++c) {
            s[c] = masked(dot(qs + r * E, ks + c * E, E) * scale, p, mask, moff, i, j0 + c);
            tile_max = s[c] > tile_max ? s[c] : tile_max;
          }
          const T new_max = tile_max > m ? tile_max : m;
          if (new_max == minus_inf<T>()) continue;  // no key allowed so far
          const T alpha = math::exp(m - new_max);
          l *= alpha;
          for (int64_t e = 0; e < Ev; ++e) acc[r * Ev + e] *= alpha;
          for (int64_t c = 0; c < cols; ++c) {
            T pe = math::exp(s[c] - new_max);
            l += pe;
            if (dropout) pe = kept(p, b, i, j0 + c) ? pe * keep_scale : T(0);
            for (int64_t e = 0; e < Ev; ++e) acc[r * Ev + e] += pe * vs[c * Ev + e];
          }
          m = new_max;
        }
        if (active) {
          const T inv = l == T(0) ? T(0) : T(1) / l;
          for (int64_t e = 0; e < Ev; ++e) out[(b * L + i) * Ev + e] = acc[r * Ev + e] * inv;
          lse[b * L + i] = l == T(0) ? minus_inf<T>() : m + math::log(l);
        }
        STRATA_BLOCK_RETURN();
      });
}

template <typename T>
void backward(const ops::OpCall& call, const TensorView& gq_view, const TensorView& gk_view, const TensorView& gv_view,
              const TensorView& go_view, const TensorView& q_view, const TensorView& k_view, const TensorView& v_view,
              const TensorView& out_view, const TensorView& lse_view, const TensorView& mask_view,
              const ops::AttentionParams& p) {
  const int64_t L = p.L, S = p.S, E = p.E, Ev = p.Ev, t = pick_tile(E, Ev, sizeof(T));
  const T* q = q_view.ptr<T>();
  const T* k = k_view.ptr<T>();
  const T* v = v_view.ptr<T>();
  const T* out = out_view.ptr<T>();
  const T* go = go_view.ptr<T>();
  const T* lse = lse_view.ptr<T>();
  T* gq = gq_view.ptr<T>();
  T* gk = gk_view.ptr<T>();
  T* gv = gv_view.ptr<T>();
  const void* mask = mask_data(mask_view, sizeof(T));
  const T scale = static_cast<T>(p.scale), keep_scale = static_cast<T>(1.0 / (1.0 - p.dropout_p));
  const bool dropout = p.dropout_p > 0.0;
  const auto batch = static_cast<std::uint32_t>(p.batch);

  // dQ: a block per query tile, a thread per query row.
  kernels::launch_block(
      site_of(call, "attention_backward_dq"), {static_cast<std::uint32_t>((L + t - 1) / t), batch},
      {static_cast<std::uint32_t>(t)}, static_cast<std::size_t>(dq_elems(t, E, Ev)) * sizeof(T),
      STRATA_BLOCK_KERNEL(ctx) {
        T* qs = ctx.dynamic_shared<T>();
        T* dos = qs + t * E;
        T* ks = dos + t * Ev;
        T* vs = ks + t * E;
        T* dq = vs + t * Ev;
        const int64_t r = ctx.idx.thread.x, b = ctx.idx.block.y, i0 = static_cast<int64_t>(ctx.idx.block.x) * t;
        const int64_t i = i0 + r;
        const bool active = i < L;
        const int64_t moff = mask == nullptr ? 0 : p.mask_offset(b);
        for (int64_t x = r; x < t * E; x += t) qs[x] = i0 + x / E < L ? q[(b * L + i0) * E + x] : T(0);
        for (int64_t x = r; x < t * Ev; x += t) dos[x] = i0 + x / Ev < L ? go[(b * L + i0) * Ev + x] : T(0);
        for (int64_t e = 0; e < E; ++e) dq[r * E + e] = T(0);
        const T row_lse = active ? lse[b * L + i] : minus_inf<T>();
        const T delta = active ? dot(go + (b * L + i) * Ev, out + (b * L + i) * Ev, Ev) : T(0);
        const int64_t rows_end = i0 + t < L ? i0 + t : L;
        const int64_t key_end = p.causal && rows_end < S ? rows_end : S;
        for (int64_t j0 = 0; j0 < key_end; j0 += t) {
          const int64_t cols = key_end - j0 < t ? key_end - j0 : t;
          STRATA_SYNCTHREADS();
          for (int64_t x = r; x < cols * E; x += t) ks[x] = k[(b * S + j0) * E + x];
          for (int64_t x = r; x < cols * Ev; x += t) vs[x] = v[(b * S + j0) * Ev + x];
          STRATA_SYNCTHREADS();
          if (!active || row_lse == minus_inf<T>()) continue;
          for (int64_t c = 0; c < cols; ++c) {
            const T s = masked(dot(qs + r * E, ks + c * E, E) * scale, p, mask, moff, i, j0 + c);
            const T prob = math::exp(s - row_lse);
            T dp = dot(dos + r * Ev, vs + c * Ev, Ev);
            if (dropout) dp = kept(p, b, i, j0 + c) ? dp * keep_scale : T(0);
            const T ds = prob * (dp - delta) * scale;
            for (int64_t e = 0; e < E; ++e) dq[r * E + e] += ds * ks[c * E + e];
          }
        }
        if (active) {
          for (int64_t e = 0; e < E; ++e) gq[(b * L + i) * E + e] = dq[r * E + e];
        }
        STRATA_BLOCK_RETURN();
      });

  // dK and dV: a block per key tile, a thread per key.
  kernels::launch_block(
      site_of(call, "attention_backward_dkv"), {static_cast<std::uint32_t>((S + t - 1) / t), batch},
      {static_cast<std::uint32_t>(t)}, static_cast<std::size_t>(dkv_elems(t, E, Ev)) * sizeof(T),
      STRATA_BLOCK_KERNEL(ctx) {
        T* ks = ctx.dynamic_shared<T>();
        T* vs = ks + t * E;
        T* qs = vs + t * Ev;
        T* dos = qs + t * E;
        T* lse_s = dos + t * Ev;
        T* delta_s = lse_s + t;
        T* dk = delta_s + t;
        T* dv = dk + t * E;
        const int64_t c = ctx.idx.thread.x, b = ctx.idx.block.y, j0 = static_cast<int64_t>(ctx.idx.block.x) * t;
        const int64_t j = j0 + c;
        const bool active = j < S;
        const int64_t moff = mask == nullptr ? 0 : p.mask_offset(b);
        for (int64_t x = c; x < t * E; x += t) ks[x] = j0 + x / E < S ? k[(b * S + j0) * E + x] : T(0);
        for (int64_t x = c; x < t * Ev; x += t) vs[x] = j0 + x / Ev < S ? v[(b * S + j0) * Ev + x] : T(0);
        for (int64_t e = 0; e < E; ++e) dk[c * E + e] = T(0);
        for (int64_t e = 0; e < Ev; ++e) dv[c * Ev + e] = T(0);
        // Under is_causal, query rows above the first key of the tile see none of its keys.
        for (int64_t i0 = p.causal ? j0 / t * t : 0; i0 < L; i0 += t) {
          const int64_t rows = L - i0 < t ? L - i0 : t;
          STRATA_SYNCTHREADS();
          for (int64_t x = c; x < rows * E; x += t) qs[x] = q[(b * L + i0) * E + x];
          for (int64_t x = c; x < rows * Ev; x += t) dos[x] = go[(b * L + i0) * Ev + x];
          if (c < rows) {
            lse_s[c] = lse[b * L + i0 + c];
            delta_s[c] = dot(go + (b * L + i0 + c) * Ev, out + (b * L + i0 + c) * Ev, Ev);
          }
          STRATA_SYNCTHREADS();
          if (!active) continue;
          for (int64_t r = 0; r < rows; ++r) {
            if (lse_s[r] == minus_inf<T>()) continue;
            const int64_t i = i0 + r;
            const T s = masked(dot(qs + r * E, ks + c * E, E) * scale, p, mask, moff, i, j);
            const T prob = math::exp(s - lse_s[r]);
            T dp = dot(dos + r * Ev, vs + c * Ev, Ev);
            T pd = prob;
            if (dropout) {
              const bool keep = kept(p, b, i, j);
              dp = keep ? dp * keep_scale : T(0);
              pd = keep ? prob * keep_scale : T(0);
            }
            for (int64_t e = 0; e < Ev; ++e) dv[c * Ev + e] += pd * dos[r * Ev + e];
            const T ds = prob * (dp - delta_s[r]) * scale;
            for (int64_t e = 0; e < E; ++e) dk[c * E + e] += ds * qs[r * E + e];
          }
        }
        if (active) {
          for (int64_t e = 0; e < E; ++e) gk[(b * S + j) * E + e] = dk[c * E + e];
          for (int64_t e = 0; e < Ev; ++e) gv[(b * S + j) * Ev + e] = dv[c * Ev + e];
        }
        STRATA_BLOCK_RETURN();
      });
}

}  // namespace attention_detail

inline void attention_blocks_forward(const ops::OpCall& call, const TensorView& out, const TensorView& lse,
                                     const TensorView& q, const TensorView& k, const TensorView& v,
                                     const TensorView& mask, const ops::AttentionParams& p) {
  switch (q.dtype) {
    case DType::F32: return attention_detail::forward<float>(call, out, lse, q, k, v, mask, p);
    case DType::F64: return attention_detail::forward<double>(call, out, lse, q, k, v, mask, p);
    default: STRATA_THROW(DTypeError, "{}: the GPU kernel takes f32 or f64, got {}", call.op, q.dtype);
  }
}

inline void attention_blocks_backward(const ops::OpCall& call, const TensorView& gq, const TensorView& gk,
                                      const TensorView& gv, const TensorView& go, const TensorView& q,
                                      const TensorView& k, const TensorView& v, const TensorView& out,
                                      const TensorView& lse, const TensorView& mask, const ops::AttentionParams& p) {
  switch (q.dtype) {
    case DType::F32: return attention_detail::backward<float>(call, gq, gk, gv, go, q, k, v, out, lse, mask, p);
    case DType::F64: return attention_detail::backward<double>(call, gq, gk, gv, go, q, k, v, out, lse, mask, p);
    default: STRATA_THROW(DTypeError, "{}: the GPU kernel takes f32 or f64, got {}", call.op, q.dtype);
  }
}

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
