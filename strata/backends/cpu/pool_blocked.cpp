// Max pooling of channel-blocked activations on the CPU, the max_pool2d_blocked entries of Note [The DNN kernel
// contract]: [N, C/b, H, W, b] in, blocked or NCHW out, for the runs of layers that stay in oneDNN's blocked layout
// (Note [Activations in oneDNN's blocked layout] in nn/blocked.cpp). Each (n, channel block) is an H x W plane of
// b-channel vectors, so a window's maximum is taken four channels at a time in GCC's generic vectors, with the
// rules of the NCHW kernel (backends/portable/pool_ops.h): the first NaN wins, and an index is the position
// h * W + w of the chosen input in its plane.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "strata/core/error.h"
#include "strata/ops/dnn_kernels.h"
#include "strata/runtime/parallel.h"

namespace strata::cpu {

namespace {

using Floats = float __attribute__((vector_size(16)));
using Ints = int32_t __attribute__((vector_size(16)));
using Longs = int64_t __attribute__((vector_size(32)));
constexpr int64_t kLanes = 4;

Floats load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The geometry of a blocked pooling: `planes` = N * C/b planes of h x w pixels of b channels in, oh x ow out. The
// output (forward) or grad_output (backward) is blocked too, or NCHW for the last pooling of a run, which gives the
// run's output in NCHW without a separate pass (Note [Activations in oneDNN's blocked layout]).
struct BlockedPlanes {
  int64_t planes, h, w, b, oh, ow;
  bool nchw_out;
  static BlockedPlanes of(const char* op, const TensorView& in, const TensorView& out) {
    const bool nchw_out = out.dim() == 4;
    STRATA_CHECK(in.dim() == 5 && in.shape[4] % kLanes == 0 &&
                     (nchw_out ? out.shape[1] == in.shape[1] * in.shape[4]
                               : out.dim() == 5 && out.shape[4] == in.shape[4]),
                 ShapeError,
                 "{}: expected a blocked input [N, C/b, H, W, b] with b a multiple of {} and a blocked or NCHW "
                 "output of the same channels, got {} and {}",
                 op, kLanes, in.shape, out.shape);
    STRATA_CHECK(in.shape[2] * in.shape[3] <= std::numeric_limits<int32_t>::max(), NotImplementedError,
                 "{}: planes of more than 2^31-1 pixels are not supported", op);
    return {in.shape[0] * in.shape[1], in.shape[2], in.shape[3], in.shape[4], out.shape[2], out.shape[3], nchw_out};
  }
  /// Where output pixel p, channel c of plane k lies in the output (or grad_output).
  int64_t out_at(int64_t k, int64_t p, int64_t c) const { return nchw_out ? (k * b + c) * oh * ow + p : at(k, p, c); }
  /// Where it lies in the indices, which stay blocked: only this file's kernels read them.
  int64_t at(int64_t k, int64_t p, int64_t c) const { return (k * oh * ow + p) * b + c; }
  /// The usual 2x2 windows of stride 2 that tile the input exactly: each input pixel in one window.
  bool tiles_2x2(const ops::Pool2dParams& p) const {
    return p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 &&
           p.pad_w == 0 && h == 2 * oh && w == 2 * ow;
  }
};

void check_f32(const ops::OpCall& call, DType dtype) {
  STRATA_CHECK(dtype == DType::F32, DTypeError, "{}: blocked layouts are for f32 tensors, got {}", call.op, dtype);
}

// Folds the pixel at `here` (its b channels from `v`) into a window's maxima: the first NaN wins.
struct WindowMax {
  Floats best;
  Ints where, nan{};
  explicit WindowMax(int32_t first) {
    constexpr float inf = std::numeric_limits<float>::infinity();
    best = Floats{-inf, -inf, -inf, -inf};
    where = Ints{first, first, first, first};
  }
  void add(const Floats& v, int32_t here) {
    const Ints is_nan = v != v;  // lanes of all ones where true
    const Ints take = ((v > best) & ~nan) | (is_nan & ~nan);
    best = take ? v : best;
    where = take ? Ints{here, here, here, here} : where;
    nan |= is_nan;
  }
};

// Stores four lanes of output pixel `pixel`, channels c.. c+3 of plane k, and where each lane's maximum lies: the
// maxima side by side in a blocked output, a plane apart in an NCHW one; the indices always blocked.
void store_lanes(const BlockedPlanes& g, float* y, int64_t* at, int64_t k, int64_t pixel, int64_t c,
                 const Floats& best, const Ints& where) {
  if (!g.nchw_out) {
    std::memcpy(y + g.out_at(k, pixel, c), &best, sizeof best);
  } else {
    for (int64_t lane = 0; lane < kLanes; ++lane) y[g.out_at(k, pixel, c + lane)] = best[lane];
  }
  const Longs wide = __builtin_convertvector(where, Longs);
  std::memcpy(at + g.at(k, pixel, c), &wide, sizeof wide);
}

// One output pixel's window (any geometry), lanes c.. c+3, with the NaN rule.
void pool_window(const BlockedPlanes& g, const ops::Pool2dParams& p, const float* xp, int64_t oy, int64_t ox,
                 int64_t c, Floats& best, Ints& where) {
  const int64_t h0 = std::max<int64_t>(oy * p.stride_h - p.pad_h, 0);
  const int64_t h1 = std::min(oy * p.stride_h - p.pad_h + p.kernel_h, g.h);
  const int64_t w0 = std::max<int64_t>(ox * p.stride_w - p.pad_w, 0);
  const int64_t w1 = std::min(ox * p.stride_w - p.pad_w + p.kernel_w, g.w);
  WindowMax m(static_cast<int32_t>(h0 * g.w + w0));
  for (int64_t iy = h0; iy < h1; ++iy) {
    for (int64_t ix = w0; ix < w1; ++ix) {
      m.add(load(xp + (iy * g.w + ix) * g.b + c), static_cast<int32_t>(iy * g.w + ix));
    }
  }
  best = m.best;
  where = m.where;
}

void max_pool2d_blocked_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& indices,
                               const TensorView& in, const ops::Pool2dParams& params) {
  check_f32(call, in.dtype);
  const BlockedPlanes planes = BlockedPlanes::of(call.op, in, out);
  parallel_for(planes.planes, 1, [&](int64_t begin, int64_t end) {
    // Locals, not the captures: the stores below could alias those as far as the compiler knows.
    const BlockedPlanes g = planes;
    const ops::Pool2dParams p = params;
    const bool tiles = g.tiles_2x2(p);
    const float* x = in.ptr<float>();
    float* y = out.ptr<float>();
    int64_t* at = indices.ptr<int64_t>();
    for (int64_t k = begin; k < end; ++k) {
      const float* xp = x + k * g.h * g.w * g.b;
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        Ints nan{};
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          for (int64_t c = 0; c < g.b; c += kLanes) {
            Floats best;
            Ints where;
            if (tiles) {
              // As the NCHW kernel's 2x2 loop: strict comparisons keep the first maximum in reading order; a NaN
              // is looked for once per row, and a row holding one is done again below.
              const auto top = static_cast<int32_t>(2 * oy * g.w + 2 * ox), width = static_cast<int32_t>(g.w);
              const float* r0 = xp + static_cast<int64_t>(top) * g.b + c;
              const float* r1 = r0 + g.w * g.b;
              const Floats a = load(r0), b = load(r0 + g.b), d = load(r1), e = load(r1 + g.b);
              const Ints right_top = b > a, right_bottom = e > d;
              const Floats upper = right_top ? b : a, lower = right_bottom ? e : d;
              const Ints down = lower > upper;
              best = down ? lower : upper;
              where = Ints{top, top, top, top} + (down ? Ints{width, width, width, width} - right_bottom : -right_top);
              const Floats sum = (a + b) + (d + e);
              nan |= sum != sum;
            } else {
              pool_window(g, p, xp, oy, ox, c, best, where);
            }
            store_lanes(g, y, at, k, oy * g.ow + ox, c, best, where);
          }
        }
        if ((nan[0] | nan[1] | nan[2] | nan[3]) != 0) {
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            for (int64_t c = 0; c < g.b; c += kLanes) {
              Floats best;
              Ints where;
              pool_window(g, p, xp, oy, ox, c, best, where);
              store_lanes(g, y, at, k, oy * g.ow + ox, c, best, where);
            }
          }
        }
      }
    }
  });
}

// Each output's gradient added at its saved index, plane by plane (one thread owns a plane), in output order as
// the NCHW kernel adds them. Where 2x2 windows tile the input, each input pixel is written once instead: its
// window's gradient where it was the maximum, zero elsewhere.
void max_pool2d_blocked_backward_kernel(const ops::OpCall& call, const TensorView& grad_in,
                                        const TensorView& grad_out, const TensorView& indices,
                                        const ops::Pool2dParams& params) {
  check_f32(call, grad_in.dtype);
  const BlockedPlanes planes = BlockedPlanes::of(call.op, grad_in, grad_out);
  parallel_for(planes.planes, 1, [&](int64_t begin, int64_t end) {
    const BlockedPlanes g = planes;  // locals, as in the forward kernel
    const bool tiles = g.tiles_2x2(params);
    float* gi = grad_in.ptr<float>();
    const float* go = grad_out.ptr<float>();
    const int64_t* at = indices.ptr<int64_t>();
    for (int64_t k = begin; k < end; ++k) {
      float* gp = gi + k * g.h * g.w * g.b;
      if (!tiles) {
        std::memset(gp, 0, static_cast<std::size_t>(g.h * g.w * g.b) * sizeof(float));
        for (int64_t pixel = 0; pixel < g.oh * g.ow; ++pixel) {
          for (int64_t c = 0; c < g.b; ++c) {
            gp[at[g.at(k, pixel, c)] * g.b + c] += go[g.out_at(k, pixel, c)];
          }
        }
        continue;
      }
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t pixel = oy * g.ow + ox, top = 2 * oy * g.w + 2 * ox;
          for (int64_t c = 0; c < g.b; c += kLanes) {
            Floats grad;
            Longs wide;
            std::memcpy(&wide, at + g.at(k, pixel, c), sizeof wide);
            const Ints where = __builtin_convertvector(wide, Ints);
            if (!g.nchw_out) {
              std::memcpy(&grad, go + g.out_at(k, pixel, c), sizeof grad);
            } else {
              for (int64_t lane = 0; lane < kLanes; ++lane) grad[lane] = go[g.out_at(k, pixel, c + lane)];
            }
            for (const int64_t in_pixel : {top, top + 1, top + g.w, top + g.w + 1}) {
              const auto here = static_cast<int32_t>(in_pixel);
              const Floats value = where == Ints{here, here, here, here} ? grad : Floats{};
              std::memcpy(gp + in_pixel * g.b + c, &value, sizeof value);
            }
          }
        }
      }
    }
  });
}

}  // namespace

STRATA_REGISTER_KERNEL("max_pool2d_blocked", CPU, MaxPool2dFn, max_pool2d_blocked_kernel);
STRATA_REGISTER_KERNEL("max_pool2d_blocked_backward", CPU, MaxPool2dBackwardFn, max_pool2d_blocked_backward_kernel);

}  // namespace strata::cpu
