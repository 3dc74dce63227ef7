#pragma once

// Copy-with-conversion and fill, written once; instantiated by backends/cpu/copy_fill.cpp and
// backends/cuda/copy_fill.cu.

#include "strata/backends/portable/launch_site.h"
#include "strata/kernels/elementwise.h"
#include "strata/ops/kernel_table.h"

namespace strata::portable {
inline namespace STRATA_KERNEL_NS {

/// Copy and fill dispatch over every dtype (kernels::dispatch), on both sides of a copy: the list their
/// registrations give the op table.
inline constexpr ops::DTypeSet kCopyFillDTypes = ops::DTypeSet::all();

template <typename Out>
struct CopyInto {
  template <typename In>
  struct From {
    static void run(const kernels::LaunchSite& site, const TensorView& out, const TensorView& in) {
      kernels::copy<Out, In>(site, out, in);
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
