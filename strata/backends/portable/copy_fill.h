#pragma once

// Copy-with-conversion and fill, written once; instantiated by backends/cpu/copy_fill.cpp and
// backends/cuda/copy_fill.cu.

#include "strata/backends/portable/launch_site.h"
#include "strata/core/macros.h"
#include "strata/kernels/elementwise.h"
#if !defined(STRATA_GPU_COMPILER)
#include "strata/backends/portable/elementwise_ops.h"  // the CPU's copy loops (below)
#endif
#include "strata/ops/kernel_table.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

/// Copy and fill dispatch over every dtype (kernels::dispatch), on both sides of a copy: the list their
/// registrations give the op table.
inline constexpr ops::DTypeSet kCopyFillDTypes = ops::DTypeSet::all();

#if !defined(STRATA_GPU_COMPILER)
/// in's value as Out (kernels::convert), from in's compute type: the op of a copy, run by the elementwise loops.
template <typename Out, typename In>
struct ConvertTo {
  Out operator()(OpMath<In> x) const { return kernels::convert<Out>(x); }
};
#endif

// On the CPU a copy runs the elementwise ops' loops (Note [Elementwise loops]): strided operands (a transpose made
// contiguous) are walked row by row rather than with an offset computation per element, which made such a copy 100
// times slower than a contiguous one. A GPU keeps kernels::copy, a thread per element: the packed loops for the 64
// pairs of dtypes, and the elementwise ops' header they come with, took nvcc 145 s to compile against 28 s (one
// copy_fill.cu, two architectures).
template <typename Out>
struct CopyInto {
  template <typename In>
  struct From {
    static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in) {
#if defined(STRATA_GPU_COMPILER)
      kernels::copy<Out, In>(site, out, in);
#else
      using Op = ConvertTo<Out, In>;
      const TensorView* views[2] = {&out, &in};
      const int64_t n = out.numel();
      Out* o = out.ptr<Out>();
      const In* x = in.ptr<In>();
      if (kernels::all_contiguous(views)) {
        portable::run<Op>(site, n, UnaryLoop<Out, In, Op>{o, x, Op{}, n, packable(o, x)});
      } else {
        const auto calc = kernels::make_offset_calculator(views);
        portable::run<Op>(site, n, UnaryStridedLoop<Out, In, Op>{o, x, calc, Op{}, n, rows_packable(calc, o, x)});
      }
#endif
    }
  };
  static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in) {
    kernels::dispatch<From>(in.dtype, site, out, in);
  }
};

inline void copy_kernel(const ops::OpCall& call, const TensorView& out, const TensorView& in) {
  kernels::dispatch<CopyInto>(out.dtype, site_of(call, "copy"), out, in);
}

template <typename T>
struct FillWith {
  static void run(const kernels::LaunchSite& site, const TensorView& out, const Scalar& value) {
    kernels::fill<T>(site, out, value.to<T>());
  }
};

inline void fill_kernel(const ops::OpCall& call, const TensorView& out, const Scalar& value) {
  kernels::dispatch<FillWith>(out.dtype, site_of(call, "fill"), out, value);
}

}  // namespace STRATA_KERNEL_NS
}  // namespace strata::portable
