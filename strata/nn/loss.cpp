// Losses: cross_entropy, nll_loss, mse_loss.
//
// The class losses work on rows [M, C] (the class dim moved last, every other dim flattened) and pick each row's
// target with the gather kernel launched under the loss's own name, so that a target outside [0, C) is a
// device-side assert that names the loss, the element and the value (Note [Device-side asserts]) without a host
// read. Their backward is a fused formula recorded on the rows; the permute/reshape to rows is ordinary autograd.

#include <cmath>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/ops/checks.h"
#include "strata/ops/indexing_kernels.h"
#include "strata/tensor/autocast.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"

namespace strata::nn::functional {

namespace {

const ops::KernelSlot<ops::GatherFn> gather_slot("gather");

/// A class loss's input as rows [M, C] and its targets as i64 [M, 1], both contiguous.
struct ClassRows {
  Tensor rows;
  Tensor target;
};

ClassRows class_rows(const char* op, const char* input_name, const Tensor& input, const Tensor& target) {
  STRATA_CHECK(input.defined() && target.defined(), InvalidArgumentError, "{}: {} and target must be defined", op,
               input_name);
  const TensorView iv = input.view(), tv = target.view();
  ops::check_same_device(op, {&iv, &tv});
  STRATA_CHECK(is_floating(input.dtype()), DTypeError, "{}: {} must be a floating tensor, got {}", op, input_name,
               input.dtype());
  STRATA_CHECK(is_integral(target.dtype()) && target.dtype() != DType::Bool, DTypeError,
               "{}: target must hold class indices (an integer tensor such as i64), got {}", op, target.dtype());
  STRATA_CHECK(input.dim() >= 2, ShapeError, "{}: {} must have at least 2 dims [N, C, ...], got shape {}", op,
               input_name, input.shape());
  STRATA_CHECK(target.dim() == input.dim() - 1, ShapeError,
               "{}: target must have one dim less than {} ({} has shape {}, so target should be [N{}]), got shape {}",
               op, input_name, input_name, input.shape(), input.dim() > 2 ? ", d..." : "", target.shape());
  STRATA_CHECK(target.size(0) == input.size(0), ShapeError,
               "{}: batch sizes differ: {} has {} rows (shape {}) but target has {} (shape {})", op, input_name,
               input.size(0), input.shape(), target.size(0), target.shape());
  for (int64_t d = 1; d < target.dim(); ++d) {
    STRATA_CHECK(target.size(d) == input.size(d + 1), ShapeError,
                 "{}: target shape {} does not match {} shape {} without its class dim 1", op, target.shape(),
                 input_name, input.shape());
  }
  const int64_t classes = input.size(1);
  Tensor rows = input;
  if (input.dim() > 2) {
    // [N, C, d...] -> [N, d..., C] -> [M, C]: row m is target element m.
    Shape perm{0};
    for (int64_t d = 2; d < input.dim(); ++d) perm.push_back(d);
    perm.push_back(1);
    rows = input.permute(perm).reshape({-1, classes});
  }
  return {rows.contiguous(), target.to(DType::I64).reshape({-1, 1}).contiguous()};
}

/// log_probs[m, target[m]] as [M, 1]; an out-of-range target is a device-side assert of `op`.
Tensor picked(const char* op, const Tensor& log_probs, const Tensor& target) {
  Tensor out = empty({target.size(0), 1}, TensorOptions(log_probs.dtype()).device(log_probs.device()));
  if (out.numel() == 0) return out;
  gather_slot.get(log_probs.device())(detail::op_call(op, log_probs.device()), out.view(), log_probs.view(),
                                      target.view(), 1);
  return out;
}

// Note [Ignored targets]
// A target equal to ignore_index is replaced by class 0 before the gather, so that it neither asserts nor reads out
// of range, and its row is multiplied by a mask of 0: it adds nothing to the loss or to the gradient. The mean
// divides by the count of the other rows, kept on the device as a tensor, so no value is read back to the host.
// The mask costs a few [M, 1] ops per call, small next to the [M, C] softmax, so it is always on.

/// Which rows count (mask [M, 1], 1 or 0 in `dtype`) and the targets with ignored ones replaced by 0.
struct Kept {
  Tensor mask, target;
};

Kept keep_rows(const Tensor& target, int64_t ignore_index, DType dtype) {
  const Tensor ignored = scalar_tensor(ignore_index, TensorOptions(DType::I64).device(target.device()));
  const Tensor keep = ne(target, ignored);
  return {keep.to(dtype), where(keep, target, zeros_like(target))};
}

/// Reduces per-row losses [M, 1] (ignored rows already 0) to the result: [target shape], or a 0-d mean or sum.
Tensor reduce_rows(const Tensor& per_row, const Tensor& mask, Reduction reduction, const Shape& target_shape) {
  switch (reduction) {
    case Reduction::None: return per_row.reshape(target_shape);
    case Reduction::Sum: return sum(per_row);
    case Reduction::Mean: break;
  }
  return sum(per_row) / sum(mask);
}

/// The gradient of the result w.r.t. each row's loss as [M, 1], 0 at ignored rows.
Tensor row_grad(const Tensor& g, const Tensor& mask, Reduction reduction, int64_t rows) {
  switch (reduction) {
    case Reduction::None: return g.reshape({rows, 1}) * mask;
    case Reduction::Sum: return g * mask;
    case Reduction::Mean: break;
  }
  return g * mask / sum(mask);
}

void check_reduction(const char* op, Reduction reduction) {
  STRATA_CHECK(reduction == Reduction::None || reduction == Reduction::Mean || reduction == Reduction::Sum,
               InvalidArgumentError, "{}: unknown reduction {}", op, static_cast<int>(reduction));
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, double label_smoothing,
                     int64_t ignore_index) {
  if (auto cast = amp::detail::f32_operands({&logits, &target})) {
    return cross_entropy((*cast)[0], (*cast)[1], reduction, label_smoothing, ignore_index);
  }
  constexpr const char* op = "cross_entropy";
  check_reduction(op, reduction);
  STRATA_CHECK(label_smoothing >= 0.0 && label_smoothing < 1.0, InvalidArgumentError,
               "{}: label_smoothing must be in [0, 1), got {}", op, label_smoothing);
  const ClassRows in = class_rows(op, "logits", logits, target);
  const int64_t rows = in.rows.size(0), classes = in.rows.size(1);
  const double ls = label_smoothing;

  Tensor log_probs, loss;
  Kept kept;
  {
    NoGradGuard no_grad;  // the derivative is recorded below as one formula
    // Rows whose target is ignore_index are masked out: see Note [Ignored targets].
    kept = keep_rows(in.target, ignore_index, logits.dtype());
    log_probs = log_softmax(in.rows, 1);
    Tensor per_row = picked(op, log_probs, kept.target) * -(1.0 - ls);
    // Smoothing mixes in the uniform distribution: ls * mean_c(-log p_c).
    if (ls > 0.0) per_row = per_row - mean(log_probs, {1}, /*keepdim=*/true) * ls;
    loss = reduce_rows(per_row * kept.mask, kept.mask, reduction, target.shape());
  }
  if (detail::needs_grad({&in.rows})) {
    // d loss_m / d x_m = softmax(x_m) - ((1 - ls) onehot(t_m) + ls / C): subtract at the target with scatter_add.
    detail::record(op, {&in.rows}, loss, [log_probs, kept, reduction, rows, classes, ls](const Tensor& g) {
      const Tensor gr = row_grad(g, kept.mask, reduction, rows);
      Tensor base = exp(log_probs);
      if (ls > 0.0) base = base - ls / static_cast<double>(classes);
      const Tensor at_target = (gr * -(1.0 - ls)).contiguous();
      return std::vector<Tensor>{scatter_add(base * gr, 1, kept.target, at_target)};
    });
  }
  return loss;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction, int64_t ignore_index) {
  if (auto cast = amp::detail::f32_operands({&log_probs, &target})) {
    return nll_loss((*cast)[0], (*cast)[1], reduction, ignore_index);
  }
  constexpr const char* op = "nll_loss";
  check_reduction(op, reduction);
  const ClassRows in = class_rows(op, "log_probs", log_probs, target);
  const int64_t rows = in.rows.size(0);
  Tensor loss;
  Kept kept;
  {
    NoGradGuard no_grad;
    kept = keep_rows(in.target, ignore_index, log_probs.dtype());  // Note [Ignored targets]
    loss = reduce_rows(-picked(op, in.rows, kept.target) * kept.mask, kept.mask, reduction, target.shape());
  }
  if (detail::needs_grad({&in.rows})) {
    detail::record(op, {&in.rows}, loss, [shape = in.rows.shape(), kept, reduction, rows](const Tensor& g) {
      const Tensor at_target = (-row_grad(g, kept.mask, reduction, rows)).contiguous();
      return std::vector<Tensor>{
          scatter_add(zeros(shape, TensorOptions(g.dtype()).device(g.device())), 1, kept.target, at_target)};
    });
  }
  return loss;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (auto cast = amp::detail::f32_operands({&input, &target})) return mse_loss((*cast)[0], (*cast)[1], reduction);
  constexpr const char* op = "mse_loss";
  check_reduction(op, reduction);
  STRATA_CHECK(input.defined() && target.defined(), InvalidArgumentError, "{}: input and target must be defined", op);
  const TensorView iv = input.view(), tv = target.view();
  ops::check_same_device(op, {&iv, &tv});
  STRATA_CHECK(is_floating(input.dtype()) && is_floating(target.dtype()), DTypeError,
               "{}: input and target must be floating tensors, got {} and {}", op, input.dtype(), target.dtype());
  STRATA_CHECK(input.shape() == target.shape(), ShapeError,
               "{}: input and target must have the same shape, got {} and {}", op, input.shape(), target.shape());
  const Tensor diff = input - target;
  const Tensor squared = diff * diff;
  switch (reduction) {
    case Reduction::None: return squared;
    case Reduction::Sum: return sum(squared);
    case Reduction::Mean: break;
  }
  return mean(squared);
}

}  // namespace strata::nn::functional
