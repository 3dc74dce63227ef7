#pragma once

#include <cstdint>

#include "strata/ops/kernel_table.h"

namespace strata::ops {

// Note [One batched GEMM]
// matmul, mm, bmm and addmm all reduce, in tensor/linalg.cpp, to one backend entry:
//   out[i] = alpha * a[i] @ b[i] + beta * out[i]   for i < batch
// with out [batch, m, n] contiguous, a [batch, m, k] and b [batch, k, n] of out's dtype (floating) and device.
// Each matrix of a and b is laid out as BLAS reads it without a copy: row-major (strides[2] == 1,
// strides[1] >= max(1, cols)) or column-major, i.e. the transpose of a row-major matrix (strides[1] == 1,
// strides[2] >= max(1, rows)). A batch stride of 0 is a broadcast operand. beta == 0 means out is not read (it may
// be uninitialised). batch, m, n and k are >= 1 (the tensors layer handles empty products itself). The tensors layer copies an operand
// only when its layout is none of these (e.g. an expanded or sliced-with-step matrix). `allow_tf32` passes the
// user's set_allow_tf32 to backends, which sit below the tensors layer: f32 products may then use TF32 units.

/// The batched strided GEMM of Note [One batched GEMM].
using GemmFn = void(const OpCall&, const TensorView& out, const TensorView& a, const TensorView& b, double alpha,
                    double beta, bool allow_tf32);

/// True when the matrices of a GEMM operand are column-major (transposed views); see Note [One batched GEMM].
inline bool gemm_transposed(const TensorView& v) { return v.strides[2] != 1; }
/// The leading dimension of a GEMM operand's matrices, as BLAS wants it.
inline int64_t gemm_leading_dim(const TensorView& v) { return gemm_transposed(v) ? v.strides[2] : v.strides[1]; }

}  // namespace strata::ops
