#pragma once

#include <cstdint>

#include "strata/ops/kernel_table.h"

namespace strata::ops {

// Note [Reductions reduce trailing dims]
// The tensors layer (tensor/reduce.cpp) permutes the input view so that the reduced dims come last, in their
// original order, and validates dims, dtypes and empty dimensions once. A backend therefore sees one shape of
// problem: `in` is [kept..., reduced...], `out` has in's kept shape, and out[r] reduces the row in[r, ...]. The
// index that argmax/argmin report is the row-major position within the reduced dims. Backends accumulate f16/bf16
// and f32 in f32, f64 in f64, and integers in i64.

/// What a reduce kernel computes for each row.
enum class ReduceOp : std::uint8_t {
  Sum,        // integers and bool give i64; floating dtypes keep theirs
  Mean,       // floating dtypes only
  Max,        // NaN propagates
  Min,
  ArgMax,     // i64: the first position of the maximum (or of the first NaN)
  ArgMin,
  Var,        // sum of squared deviations / (count - correction), floating only
  Norm,       // p-norm, p may be +-inf or 0, floating only
  LogSumExp,  // log(sum(exp(x))) computed around the maximum, floating only
};

/// Arguments of one reduction; `reduced_dims` is how many trailing dims of `in` are reduced.
struct ReduceParams {
  ReduceOp op = ReduceOp::Sum;
  int64_t reduced_dims = 0;
  double p = 2.0;           // Norm
  double correction = 0.0;  // Var: 1 for Bessel's correction
};

/// out[r] = op over in[r, ...] for every index r of in's leading (kept) dims; in may be strided.
using ReduceFn = void(const OpCall&, const TensorView& out, const TensorView& in, const ReduceParams& params);
/// Softmax (log-softmax when `log`) over the last dim of `in`, written to `out` of the same shape; either may be
/// strided. Floating dtypes only; f16/bf16 compute in f32.
using SoftmaxFn = void(const OpCall&, const TensorView& out, const TensorView& in, bool log);

}  // namespace strata::ops
