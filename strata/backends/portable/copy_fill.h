#pragma once

// Copy-with-conversion and fill, written once; instantiated by backends/cpu/copy_fill.cpp and
// backends/cuda/copy_fill.cu.

#include "strata/backends/portable/elementwise_ops.h"
#include "strata/backends/portable/launch_site.h"
#include "strata/kernels/elementwise.h"
#include "strata/ops/kernel_table.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

/// Copy and fill dispatch over every dtype (kernels::dispatch), on both sides of a copy: the list their
/// registrations give the op table.
inline constexpr ops::DTypeSet kCopyFillDTypes = ops::DTypeSet::all();

/// in's value as Out (kernels::convert), from in's compute type: the op of a copy, run by the elementwise loops.
template <typename Out, typename In>
struct ConvertTo {
  STRATA_HOST_DEVICE Out operator()(OpMath<In> x) const { return kernels::convert<Out>(x); }
};

// A copy runs the elementwise ops' loops (Note [Elementwise loops]): on the CPU, strided operands (a transpose made
// contiguous) are walked row by row rather than with an offset computation per element, which made such a copy
// 100 times slower than a contiguous one; on a GPU, rows are read and written as vectors where they allow it.
template <typename Out>
struct CopyInto {
  template <typename In>
  struct From {
    static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in) {
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
