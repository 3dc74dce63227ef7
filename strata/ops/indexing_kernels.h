#pragma once

#include "strata/ops/kernel_table.h"

namespace strata::ops {

// Indexing kernels take contiguous operands and i64 indices; the tensors layer prepares them (tensor/indexing.cpp).
// Every index is checked in the kernel with STRATA_KERNEL_ASSERT (see Note [Device-side asserts]).

/// out[o, j, i] = in[o, index[j], i] with in viewed as [outer, size, inner].
using IndexSelectFn = void(const OpCall&, const TensorView& out, const TensorView& in, const TensorView& index,
                           int64_t dim);
/// out[p] = in[p with p[dim] replaced by index[p]]; out has index's shape.
using GatherFn = void(const OpCall&, const TensorView& out, const TensorView& in, const TensorView& index,
                      int64_t dim);
/// out[p with p[dim] replaced by index[p]] += src[p] for every p of index's shape (atomically).
using ScatterAddFn = void(const OpCall&, const TensorView& out, const TensorView& index, const TensorView& src,
                          int64_t dim);
/// out[n, labels[n]] = 1 with out zero-filled, viewed as [N, num_classes].
using OneHotFn = void(const OpCall&, const TensorView& out, const TensorView& labels, int64_t num_classes);
/// The k largest (or smallest) elements of each row of `in` ([rows, size]), best first: values [rows, k] in in's
/// dtype and their positions in the row, indices [rows, k] i64 ("topk"). NaN counts as larger than every number (as
/// PyTorch); equal values keep their order in the row.
using TopkFn = void(const OpCall&, const TensorView& values, const TensorView& indices, const TensorView& in, int64_t k,
                    bool largest);

}  // namespace strata::ops
