#pragma once

// Reductions, written once; instantiated by backends/cpu/reduce_ops.cpp and backends/cuda/reduce_*.cu (softmax is
// in softmax_ops.h, the accumulators in reduce_accumulators.h). The input is [kept..., reduced...] (see
// Note [Reductions reduce trailing dims] in ops/reduce_kernels.h).
//
// Note [How a reduction runs]
// Each op is an accumulator (identity, add, merge, store) over a row of `count` elements. Rows, optionally split
// into `segments` pieces to give every core or SM work when there are few rows, are the unit of work:
// - CPU: launch() with one thread per block runs the items on the OpenMP pool; each item walks its elements
//   serially, folding blocks of kCascadeBlock elements into a binary cascade (pairwise summation), so an f32 sum
//   of 10M values is off by a few ulps, not by sqrt(n) of them.
// - GPU: a block per item; its threads stride over the elements and merge their accumulators in a shared-memory
//   tree. Rows of at most 32 elements take a thread per row instead (forall).
// When the reduced elements are strided but the input's contiguous dim is kept (a sum over the batch dim), items
// are tiles of neighbouring rows that walk the reduced positions together (ReduceTiles), so reads stay local on
// the CPU and coalesced on the GPU. With segments > 1 a second pass merges each row's partial accumulators, kept
// in scratch memory from the device's allocator.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "strata/backends/portable/launch_site.h"
#include "strata/backends/portable/reduce_accumulators.h"
#include "strata/kernels/elementwise.h"
#include "strata/ops/reduce_kernels.h"
#include "strata/runtime/allocator.h"
#include "strata/runtime/parallel.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

/// Largest block the GPU paths launch (the shared-memory tree is sized for it).
inline constexpr unsigned kMaxReduceBlock = 256;

/// Where the elements of a row are: kept dims map a row to out/in offsets, reduced dims map a position k in the
/// row to an in offset (innermost merged dim plus the rest). Device-copyable.
struct ReduceLayout {
  kernels::OffsetCalculator<2> rows;
  kernels::OffsetCalculator<1> outer;
  int64_t inner_size = 1, inner_stride = 0;
  int64_t count = 0;
  int64_t segments = 1, segment_len = 1;

  STRATA_HOST_DEVICE int64_t outer_offset(int64_t j) const {
    if (outer.ndim == 0) return 0;
    int64_t o[1];
    outer.offsets(j, o);
    return o[0];
  }
  STRATA_HOST_DEVICE int64_t offset(int64_t k) const {
    if (outer.ndim == 0) return k * inner_stride;
    const int64_t j = k / inner_size;
    return outer_offset(j) + (k - j * inner_size) * inner_stride;
  }
};

#if defined(STRATA_DEVICE_PASS)
/// Merges the accumulators of a block's threads (blockDim.x a power of two); every thread gets the result.
template <typename Acc>
__device__ Acc block_merge(Acc acc, const ops::ReduceParams& p) {
  __shared__ __align__(16) unsigned char raw[kMaxReduceBlock * sizeof(Acc)];
  Acc* shared = reinterpret_cast<Acc*>(raw);
  const unsigned tid = threadIdx.x;
  shared[tid] = acc;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) shared[tid].merge(shared[tid + s], p);
    __syncthreads();
  }
  return shared[0];
}

/// Merges accumulators along threadIdx.y (blockDim.y a power of two) for each threadIdx.x; y = 0 gets the result.
template <typename Acc>
__device__ Acc column_merge(Acc acc, const ops::ReduceParams& p) {
  __shared__ __align__(16) unsigned char raw[kMaxReduceBlock * sizeof(Acc)];
  Acc* shared = reinterpret_cast<Acc*>(raw);
  const unsigned x = threadIdx.x, width = blockDim.x;
  shared[threadIdx.y * width + x] = acc;
  __syncthreads();
  for (unsigned s = blockDim.y / 2; s > 0; s >>= 1) {
    if (threadIdx.y < s) shared[threadIdx.y * width + x].merge(shared[(threadIdx.y + s) * width + x], p);
    __syncthreads();
  }
  return shared[x];
}
#endif

/// Folds positions [begin, end) of a row into an accumulator, walking runs of the innermost reduced dim.
template <typename Acc, typename T>
STRATA_HOST_DEVICE Acc accumulate_serial(const T* row, const ReduceLayout& l, int64_t begin, int64_t end,
                                         const ops::ReduceParams& p) {
#if defined(STRATA_DEVICE_PASS)
  Acc acc = Acc::identity(p);
  for (int64_t k = begin; k < end;) {
    const int64_t j = k / l.inner_size, i = k - j * l.inner_size;
    const int64_t n = l.inner_size - i < end - k ? l.inner_size - i : end - k;
    acc.add_run(row + l.outer_offset(j) + i * l.inner_stride, n, l.inner_stride, k, p);
    k += n;
  }
  return acc;
#else
  Cascade<Acc> cascade;
  Acc block = Acc::identity(p);
  int64_t filled = 0;
  for (int64_t k = begin; k < end;) {
    const int64_t j = k / l.inner_size, i = k - j * l.inner_size;
    const int64_t n = std::min(std::min(l.inner_size - i, end - k), kCascadeBlock - filled);
    block.add_run(row + l.outer_offset(j) + i * l.inner_stride, n, l.inner_stride, k, p);
    filled += n;
    if (filled == kCascadeBlock) {
      cascade.push(block, p);
      block = Acc::identity(p);
      filled = 0;
    }
    k += n;
  }
  return cascade.result(block, p);
#endif
}

/// Writes a finished row, or its partial accumulator when rows are split into segments.
template <typename Acc>
STRATA_HOST_DEVICE void emit_row(const Acc& acc, void* out, Acc* partials, const ReduceLayout& l,
                                 const ops::ReduceParams& p, int64_t row, int64_t segment, int64_t out_at) {
  if (partials != nullptr) {
    partials[row * l.segments + segment] = acc;
  } else {
    acc.store(out, out_at, l.count, p);
  }
}

/// Pass 1: one item per (row, segment); `partials` is null when rows are not split.
template <typename Acc, typename T>
struct ReduceRows {
  void* out;
  const T* in;
  Acc* partials;
  ReduceLayout l;
  ops::ReduceParams p;

  STRATA_HOST_DEVICE void operator()(int64_t item) const {
    const int64_t row = item / l.segments, segment = item - row * l.segments;
    int64_t o[2];
    l.rows.offsets(row, o);
    const int64_t begin = segment * l.segment_len;
    const int64_t end = begin + l.segment_len < l.count ? begin + l.segment_len : l.count;
    emit_row(accumulate_serial<Acc>(in + o[1], l, begin, end, p), out, partials, l, p, row, segment, o[0]);
  }
  STRATA_HOST_DEVICE void operator()(const kernels::ThreadIndex& idx) const {
    const int64_t item = idx.block.x;
#if defined(STRATA_DEVICE_PASS)
    const int64_t row = item / l.segments, segment = item - row * l.segments;
    int64_t o[2];
    l.rows.offsets(row, o);
    const int64_t begin = segment * l.segment_len;
    const int64_t end = begin + l.segment_len < l.count ? begin + l.segment_len : l.count;
    const T* base = in + o[1];
    Acc acc = Acc::identity(p);
    for (int64_t k = begin + idx.thread.x; k < end; k += idx.block_dim.x) acc.add(base[l.offset(k)], k, p);
    acc = block_merge(acc, p);
    if (idx.thread.x == 0) emit_row(acc, out, partials, l, p, row, segment, o[0]);
#else
    if (idx.thread.x == 0) (*this)(item);  // see launch(): a CPU block's threads run one after another
#endif
  }
};

/// Rows one CPU item of ReduceTiles folds together.
inline constexpr int64_t kCpuTile = 16;

/// Pass 1 when the input's contiguous dim is kept and the reduced elements are strided (sums over a batch dim):
/// a tile of consecutive rows walks the reduced positions together, so each position reads neighbouring memory.
/// On the GPU a block is (rows of the tile) x (lanes along the row); on the CPU an item folds kCpuTile rows.
template <typename Acc, typename T>
struct ReduceTiles {
  void* out;
  const T* in;
  Acc* partials;
  ReduceLayout l;
  ops::ReduceParams p;
  int64_t rows;

  void fold_tile(int64_t item) const {  // host only: the cascades live on the stack
    const int64_t tile = item / l.segments, segment = item - tile * l.segments;
    const int64_t first = tile * kCpuTile, count = std::min(kCpuTile, rows - first);
    int64_t in_at[kCpuTile], out_at[kCpuTile];
    Cascade<Acc> cascade[kCpuTile];
    Acc block[kCpuTile];
    for (int64_t w = 0; w < count; ++w) {
      int64_t o[2];
      l.rows.offsets(first + w, o);
      out_at[w] = o[0];
      in_at[w] = o[1];
      block[w] = Acc::identity(p);
    }
    const int64_t begin = segment * l.segment_len, end = std::min(l.count, begin + l.segment_len);
    int64_t filled = 0;
    for (int64_t k = begin; k < end;) {
      const int64_t j = k / l.inner_size, i = k - j * l.inner_size;
      const int64_t n = std::min(std::min(l.inner_size - i, end - k), kCascadeBlock - filled);
      const T* run = in + l.outer_offset(j) + i * l.inner_stride;
      for (int64_t q = 0; q < n; ++q) {
        const T* at = run + q * l.inner_stride;
        for (int64_t w = 0; w < count; ++w) block[w].add(at[in_at[w]], k + q, p);
      }
      filled += n;
      if (filled == kCascadeBlock) {
        for (int64_t w = 0; w < count; ++w) {
          cascade[w].push(block[w], p);
          block[w] = Acc::identity(p);
        }
        filled = 0;
      }
      k += n;
    }
    for (int64_t w = 0; w < count; ++w) {
      emit_row(cascade[w].result(block[w], p), out, partials, l, p, first + w, segment, out_at[w]);
    }
  }
  STRATA_HOST_DEVICE void operator()(int64_t item) const {
#if !defined(STRATA_DEVICE_PASS)
    fold_tile(item);
#else
    (void)item;  // the device runs the ThreadIndex overload
#endif
  }
  STRATA_HOST_DEVICE void operator()(const kernels::ThreadIndex& idx) const {
#if defined(STRATA_DEVICE_PASS)
    const int64_t tile = idx.block.x / l.segments, segment = idx.block.x - tile * l.segments;
    const int64_t row = tile * idx.block_dim.x + idx.thread.x;
    const bool valid = row < rows;  // every thread still joins the merge below
    int64_t o[2] = {0, 0};
    if (valid) l.rows.offsets(row, o);
    const int64_t begin = segment * l.segment_len;
    const int64_t end = begin + l.segment_len < l.count ? begin + l.segment_len : l.count;
    Acc acc = Acc::identity(p);
    if (valid) {
      for (int64_t k = begin + idx.thread.y; k < end; k += idx.block_dim.y) acc.add(in[o[1] + l.offset(k)], k, p);
    }
    acc = column_merge(acc, p);
    if (valid && idx.thread.y == 0) emit_row(acc, out, partials, l, p, row, segment, o[0]);
#else
    if (idx.thread.x == 0 && idx.thread.y == 0) fold_tile(idx.block.x);
#endif
  }
};

/// Pass 2 (segments > 1): merges each row's partial accumulators in order and stores the result.
template <typename Acc>
struct MergePartials {
  void* out;
  const Acc* partials;
  kernels::OffsetCalculator<2> rows;
  int64_t segments, count;
  ops::ReduceParams p;

  STRATA_HOST_DEVICE void operator()(int64_t row) const {
    int64_t o[2];
    rows.offsets(row, o);
    Acc acc = partials[row * segments];
    for (int64_t s = 1; s < segments; ++s) acc.merge(partials[row * segments + s], p);
    acc.store(out, o[0], count, p);
  }
  STRATA_HOST_DEVICE void operator()(const kernels::ThreadIndex& idx) const {
    const int64_t row = idx.block.x;
#if defined(STRATA_DEVICE_PASS)
    Acc acc = Acc::identity(p);
    for (int64_t s = idx.thread.x; s < segments; s += idx.block_dim.x) acc.merge(partials[row * segments + s], p);
    acc = block_merge(acc, p);
    if (idx.thread.x == 0) {
      int64_t o[2];
      rows.offsets(row, o);
      acc.store(out, o[0], count, p);
    }
#else
    if (idx.thread.x == 0) (*this)(row);
#endif
  }
};

/// Builds the layout of `in` = [kept (out's shape)..., reduced (the last `reduced_dims`)...].
inline ReduceLayout make_reduce_layout(const TensorView& out, const TensorView& in, int64_t reduced_dims) {
  const int64_t kept = in.dim() - reduced_dims;
  ReduceLayout l;
  TensorView in_kept = in;
  in_kept.shape = Shape(in.shape.begin(), in.shape.begin() + kept);
  in_kept.strides = Strides(in.strides.begin(), in.strides.begin() + kept);
  TensorView out_kept = out;
  out_kept.shape = in_kept.shape;
  const TensorView* row_views[2] = {&out_kept, &in_kept};
  l.rows = kernels::make_offset_calculator(row_views);

  TensorView reduced = in;
  reduced.shape = Shape(in.shape.begin() + kept, in.shape.end());
  reduced.strides = Strides(in.strides.begin() + kept, in.strides.end());
  l.count = reduced.numel();
  if (l.count > 0) {
    const TensorView* reduced_views[1] = {&reduced};
    l.outer = kernels::make_offset_calculator(reduced_views);
    if (l.outer.ndim > 0) {
      l.outer.ndim -= 1;  // the innermost merged dim is walked directly
      l.inner_size = l.outer.sizes[l.outer.ndim];
      l.inner_stride = l.outer.strides[0][l.outer.ndim];
    }
  }
  return l;
}

/// How the rows are spread over the device (see Note [How a reduction runs]).
struct ReducePlan {
  int64_t segments = 1;
  int64_t tile = 0;            // rows per item of ReduceTiles; 0: ReduceRows, an item per row
  bool parallel = true;        // CPU: false runs the items inline (little work)
  bool thread_per_row = false;  // GPU: forall, each thread folding a whole row
  unsigned block_x = 1, block_y = 1;
};

/// Smallest power of two >= n, clamped to [32, kMaxReduceBlock].
inline unsigned block_size_for(int64_t n) {
  unsigned b = 32;
  while (b < kMaxReduceBlock && b < n) b *= 2;
  return b;
}

/// Splits rows into segments when there are fewer than `target` items, keeping segments >= min_segment long.
inline int64_t segments_for(int64_t items, int64_t target, int64_t count, int64_t min_segment) {
  if (items >= target) return 1;
  return std::max<int64_t>(1, std::min((target + items - 1) / items, count / min_segment));
}

inline ReducePlan plan_reduce(Device device, int64_t rows, const ReduceLayout& l) {
  ReducePlan plan;
  // Tiles pay off when the reduced elements are strided but neighbouring rows are neighbours in memory.
  const bool kept_contiguous = l.rows.ndim > 0 && l.rows.strides[1][l.rows.ndim - 1] == 1;
  const bool tiled = kept_contiguous && l.inner_stride != 1 && l.count > 1 && rows > 1;
  if (device.is_cpu()) {
    plan.tile = tiled ? kCpuTile : 0;
    if (rows * l.count < kernels::kCpuGrain) {
      plan.parallel = false;
      return plan;
    }
    const int64_t items = tiled ? (rows + kCpuTile - 1) / kCpuTile : rows;
    constexpr int64_t kMinSegment = 16384;  // elements of one item; below this, bookkeeping shows
    plan.segments = segments_for(items, 4 * num_threads(), l.count, tiled ? kMinSegment / kCpuTile : kMinSegment);
    return plan;
  }
  constexpr int64_t kTargetBlocks = 1024;
  if (tiled) {
    plan.tile = 32;
    plan.block_x = 32;
    plan.block_y = 8;
    plan.segments = segments_for((rows + 31) / 32, kTargetBlocks, l.count, 256);
    return plan;
  }
  if (l.count <= 32) {
    plan.thread_per_row = true;
    return plan;
  }
  plan.segments = segments_for(rows, kTargetBlocks, l.count, 4096);
  plan.block_x = block_size_for((l.count + plan.segments - 1) / plan.segments);
  return plan;
}

template <typename Pass>
void launch_pass(const kernels::LaunchSite& site, const ReducePlan& plan, int64_t items, const Pass& pass) {
  STRATA_CHECK(items < (int64_t{1} << 31), ShapeError, "{}: too many output elements for one launch ({} items)",
               site.op, items);
  if (!plan.parallel || plan.thread_per_row) {
    kernels::forall(site, items, pass);  // inline on the CPU (little work); a thread per row on the GPU
  } else if (site.device.is_cpu()) {
    kernels::launch(site, {static_cast<std::uint32_t>(items)}, {1}, pass);
  } else {
    kernels::launch(site, {static_cast<std::uint32_t>(items)}, {plan.block_x, plan.block_y}, pass);
  }
}

template <typename Acc, typename T>
void run_reduce(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in,
                const ops::ReduceParams& p) {
  const int64_t rows = out.numel();
  if (rows == 0) return;
  ReduceLayout l = make_reduce_layout(out, in, p.reduced_dims);
  const ReducePlan plan = plan_reduce(site.device, rows, l);
  l.segment_len = std::max<int64_t>(1, (l.count + plan.segments - 1) / plan.segments);
  l.segments = std::max<int64_t>(1, (l.count + l.segment_len - 1) / l.segment_len);

  DataPtr scratch;
  Acc* partials = nullptr;
  if (l.segments > 1) {
    const auto bytes = static_cast<std::size_t>(rows * l.segments) * sizeof(Acc);
    scratch = allocator(site.device).allocate(bytes, site.stream, site.op);
    partials = static_cast<Acc*>(scratch.get());
  }
  void* const out_base = static_cast<char*>(out.data) + out.offset * static_cast<int64_t>(dtype_size(out.dtype));
  if (plan.tile > 0) {
    const int64_t tiles = (rows + plan.tile - 1) / plan.tile;
    launch_pass(site, plan, tiles * l.segments, ReduceTiles<Acc, T>{out_base, in.ptr<T>(), partials, l, p, rows});
  } else {
    launch_pass(site, plan, rows * l.segments, ReduceRows<Acc, T>{out_base, in.ptr<T>(), partials, l, p});
  }
  if (l.segments > 1) {
    const MergePartials<Acc> merge{out_base, partials, l.rows, l.segments, l.count, p};
    const unsigned block = site.device.is_cpu() ? 1 : block_size_for(l.segments);
    kernels::launch(site, {static_cast<std::uint32_t>(rows)}, {block}, merge);
  }
}

// Note [Reduction families]
// The accumulators fall into three families, each instantiated for every dtype by reduce_family<F>. nvcc compiles
// every pass of every accumulator for every dtype and GPU architecture, so the CUDA backend instantiates each
// family in its own .cu file (reduce_*.cu) and a parallel build compiles them side by side; one file for all of
// them was the second-longest step of a CUDA build. The CPU backend instantiates all three from one file.
enum class ReduceFamily { Sum, Extremum, Moments };

inline ReduceFamily family_of(ops::ReduceOp op) {
  using ops::ReduceOp;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: return ReduceFamily::Sum;
    case ReduceOp::Max:
    case ReduceOp::Min:
    case ReduceOp::ArgMax:
    case ReduceOp::ArgMin: return ReduceFamily::Extremum;
    default: return ReduceFamily::Moments;
  }
}

template <ReduceFamily F>
struct ReduceFamilyDispatch {
  template <typename T>
  struct Visit {
    static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in,
                    const ops::ReduceParams& p) {
      using ops::ReduceOp;
      if constexpr (F == ReduceFamily::Sum) {
        if (p.op == ReduceOp::Sum || (kIsFloating<T> && p.op == ReduceOp::Mean)) {
          return run_reduce<SumAcc<T>, T>(site, out, in, p);
        }
      } else if constexpr (F == ReduceFamily::Extremum) {
        return run_reduce<ExtremumAcc<T>, T>(site, out, in, p);
      } else if constexpr (kIsFloating<T>) {
        switch (p.op) {
          case ReduceOp::Var: return run_reduce<VarAcc<T>, T>(site, out, in, p);
          case ReduceOp::Norm: return run_reduce<NormAcc<T>, T>(site, out, in, p);
          case ReduceOp::LogSumExp: return run_reduce<LogSumExpAcc<T>, T>(site, out, in, p);
          default: break;
        }
      }
      STRATA_THROW(DTypeError, "{}: not supported for dtype {}", site.op, dtype_of<T>);
    }
  };
};

/// The reductions of one family for every dtype. Not inline, so that a translation unit can leave its
/// instantiation to another (`extern template`, Note [Reduction families]).
template <ReduceFamily F>
void reduce_family(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in,
                   const ops::ReduceParams& params) {
  kernels::dispatch<ReduceFamilyDispatch<F>::template Visit>(in.dtype, site, out, in, params);
}

inline void reduce_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& in,
                          const ops::ReduceParams& params) {
  const kernels::LaunchSite site = site_of(call, "reduce");
  switch (family_of(params.op)) {
    case ReduceFamily::Sum: return reduce_family<ReduceFamily::Sum>(site, out, in, params);
    case ReduceFamily::Extremum: return reduce_family<ReduceFamily::Extremum>(site, out, in, params);
    case ReduceFamily::Moments: return reduce_family<ReduceFamily::Moments>(site, out, in, params);
  }
}

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
