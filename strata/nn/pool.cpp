// max_pool2d, avg_pool2d, adaptive_avg_pool2d: arguments are checked here, once; backends compute (Note [The DNN
// kernel contract] in ops/dnn_kernels.h).

#include <limits>
#include <utility>

#include "strata/core/error.h"
#include "strata/nn/blocked.h"
#include "strata/nn/functional.h"
#include "strata/ops/dnn_kernels.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/op_call.h"

namespace strata::nn::functional {

namespace {

const ops::KernelSlot<ops::MaxPool2dFn> max_pool2d_slot("max_pool2d");
const ops::KernelSlot<ops::MaxPool2dBackwardFn> max_pool2d_backward_slot("max_pool2d_backward");
const ops::KernelSlot<ops::MaxPool2dFn> max_pool2d_blocked_slot("max_pool2d_blocked");
const ops::KernelSlot<ops::MaxPool2dBackwardFn> max_pool2d_blocked_backward_slot("max_pool2d_blocked_backward");
const ops::KernelSlot<ops::AvgPool2dFn> avg_pool2d_slot("avg_pool2d");
const ops::KernelSlot<ops::AvgPool2dBackwardFn> avg_pool2d_backward_slot("avg_pool2d_backward");
const ops::KernelSlot<ops::AdaptiveAvgPool2dFn> adaptive_slot("adaptive_avg_pool2d");
const ops::KernelSlot<ops::AdaptiveAvgPool2dBackwardFn> adaptive_backward_slot("adaptive_avg_pool2d_backward");

// `block` > 0: the input is a blocked activation [N, C/b, H, W, b] (Note [Activations in oneDNN's blocked layout]),
// whose H and W are where NCHW's are.
void check_input(const char* op, const Tensor& input, int64_t block = 0) {
  STRATA_CHECK(input.defined(), InvalidArgumentError, "{}: the input is an undefined tensor", op);
  if (block != 0) {
    blocked::nchw_shape(op, input, block);  // checks that it is one
  } else {
    STRATA_CHECK(input.dim() == 4, ShapeError, "{}: expected a 4-D input [N, C, H, W], got shape {}", op,
                 input.shape());
  }
  STRATA_CHECK(is_floating(input.dtype()), DTypeError,
               "{}: {} inputs are not supported; pooling takes floating tensors (convert with .to(DType::F32))", op,
               input.dtype());
  STRATA_CHECK(input.size(2) >= 1 && input.size(3) >= 1, ShapeError, "{}: the input of shape {} has no pixels", op,
               input.shape());
}

struct Pool {
  ops::Pool2dParams params;
  Shape out_shape;
};

Pool check_window(const char* op, const Tensor& input, Pair kernel, std::optional<Pair> stride_arg, Pair padding,
                  int64_t block = 0) {
  check_input(op, input, block);
  const Pair stride = stride_arg.value_or(kernel);
  STRATA_CHECK(kernel.h >= 1 && kernel.w >= 1, InvalidArgumentError, "{}: kernel size must be positive, got ({}, {})",
               op, kernel.h, kernel.w);
  STRATA_CHECK(stride.h >= 1 && stride.w >= 1, InvalidArgumentError, "{}: stride must be positive, got ({}, {})", op,
               stride.h, stride.w);
  STRATA_CHECK(padding.h >= 0 && padding.w >= 0, InvalidArgumentError,
               "{}: padding must be non-negative, got ({}, {})", op, padding.h, padding.w);
  // The window arithmetic is in int64 (an average divides by kernel.h * kernel.w), and backends take int.
  for (const auto& [what, p] : {std::pair{"kernel size", kernel}, {"stride", stride}}) {
    STRATA_CHECK(p.h <= std::numeric_limits<int32_t>::max() && p.w <= std::numeric_limits<int32_t>::max(),
                 NotImplementedError, "{}: {} ({}, {}) is larger than 2^31-1", op, what, p.h, p.w);
  }
  // PyTorch's rule: a window is never only padding.
  STRATA_CHECK(padding.h <= kernel.h / 2 && padding.w <= kernel.w / 2, InvalidArgumentError,
               "{}: padding ({}, {}) must be at most half the kernel size ({}, {})", op, padding.h, padding.w,
               kernel.h, kernel.w);
  const int64_t h = input.size(2), w = input.size(3);
  STRATA_CHECK(kernel.h <= h + 2 * padding.h && kernel.w <= w + 2 * padding.w, ShapeError,
               "{}: the kernel ({}x{}) is larger than the padded input ({}x{}: shape {} with padding ({}, {}))", op,
               kernel.h, kernel.w, h + 2 * padding.h, w + 2 * padding.w, input.shape(), padding.h, padding.w);
  Pool pool;
  pool.params = {kernel.h, kernel.w, stride.h, stride.w, padding.h, padding.w};
  pool.out_shape = {input.size(0), input.size(1), ops::window_output_size(h, kernel.h, stride.h, padding.h),
                    ops::window_output_size(w, kernel.w, stride.w, padding.w)};
  if (block != 0) pool.out_shape.push_back(block);
  return pool;
}

TensorOptions options_of(const Tensor& t) { return TensorOptions(t.dtype()).device(t.device()); }

// max_pool2d of an NCHW input (`block` 0) or of a blocked one, whose output is blocked too unless `nchw_out`.
Tensor max_pool(const Tensor& input_arg, Pair kernel, std::optional<Pair> stride, Pair padding, int64_t block,
                bool nchw_out) {
  constexpr const char* op = "max_pool2d";
  const Pool pool = check_window(op, input_arg, kernel, stride, padding, block);
  const Shape& s = pool.out_shape;
  const ops::KernelSlot<ops::MaxPool2dFn>& forward = block != 0 ? max_pool2d_blocked_slot : max_pool2d_slot;
  const Tensor input = input_arg.contiguous();
  Tensor out = empty(block != 0 && nchw_out ? Shape{s[0], s[1] * block, s[2], s[3]} : s, options_of(input));
  // Blocked pooling keeps its indices blocked whatever its output: only its own backward reads them.
  Tensor indices = empty(s, TensorOptions(DType::I64).device(input.device()));
  if (out.numel() > 0) {
    forward.get(input.device())(detail::op_call(op, input.device()), out.view(), indices.view(), input.view(),
                                pool.params);
  }
  if (detail::needs_grad({&input_arg})) {
    const Shape in_shape = input.shape();
    const ops::Pool2dParams params = pool.params;
    const ops::KernelSlot<ops::MaxPool2dBackwardFn>* backward =
        block != 0 ? &max_pool2d_blocked_backward_slot : &max_pool2d_backward_slot;
    detail::record(op, {&input_arg}, out, [in_shape, indices, params, backward](const Tensor& g) {
      Tensor gi = empty(in_shape, options_of(g));
      if (gi.numel() > 0) {
        backward->get(g.device())(detail::op_call("max_pool2d_backward", g.device()), gi.view(), g.contiguous().view(),
                                 indices.view(), params);
      }
      return std::vector<Tensor>{gi};
    }, detail::Saves::kNothing);
  }
  return out;
}

}  // namespace

Tensor max_pool2d(const Tensor& input, Pair kernel, std::optional<Pair> stride, Pair padding) {
  return max_pool(input, kernel, stride, padding, 0, false);
}

Tensor avg_pool2d(const Tensor& input_arg, Pair kernel, std::optional<Pair> stride, Pair padding) {
  constexpr const char* op = "avg_pool2d";
  const Pool pool = check_window(op, input_arg, kernel, stride, padding);
  const Tensor input = input_arg.contiguous();
  Tensor out = empty(pool.out_shape, options_of(input));
  if (out.numel() > 0) {
    avg_pool2d_slot.get(input.device())(detail::op_call(op, input.device()), out.view(), input.view(), pool.params);
  }
  if (detail::needs_grad({&input_arg})) {
    const Shape in_shape = input.shape();
    const ops::Pool2dParams params = pool.params;
    detail::record(op, {&input_arg}, out, [in_shape, params](const Tensor& g) {
      Tensor gi = empty(in_shape, options_of(g));
      if (gi.numel() > 0) {
        avg_pool2d_backward_slot.get(g.device())(detail::op_call("avg_pool2d_backward", g.device()), gi.view(),
                                                 g.contiguous().view(), params);
      }
      return std::vector<Tensor>{gi};
    }, detail::Saves::kNothing);
  }
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& input_arg, Pair output_size) {
  constexpr const char* op = "adaptive_avg_pool2d";
  check_input(op, input_arg);
  STRATA_CHECK(output_size.h >= 1 && output_size.w >= 1, InvalidArgumentError,
               "{}: the output size must be positive, got ({}, {})", op, output_size.h, output_size.w);
  const Tensor input = input_arg.contiguous();
  Tensor out = empty({input.size(0), input.size(1), output_size.h, output_size.w}, options_of(input));
  if (out.numel() > 0) {
    adaptive_slot.get(input.device())(detail::op_call(op, input.device()), out.view(), input.view());
  }
  if (detail::needs_grad({&input_arg})) {
    const Shape in_shape = input.shape();
    detail::record(op, {&input_arg}, out, [in_shape](const Tensor& g) {
      Tensor gi = empty(in_shape, options_of(g));
      if (gi.numel() > 0) {
        adaptive_backward_slot.get(g.device())(detail::op_call("adaptive_avg_pool2d_backward", g.device()),
                                               gi.view(), g.contiguous().view());
      }
      return std::vector<Tensor>{gi};
    }, detail::Saves::kNothing);
  }
  return out;
}

}  // namespace strata::nn::functional

namespace strata::nn::blocked {

Tensor max_pool2d(const Tensor& input, Pair kernel, std::optional<Pair> stride, Pair padding, int64_t block,
                  bool nchw_out) {
  return functional::max_pool(input, kernel, stride, padding, block, nchw_out);
}

}  // namespace strata::nn::blocked
