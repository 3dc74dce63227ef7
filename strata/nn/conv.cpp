// conv2d and conv2d_relu: arguments are checked here, once; backends compute (Note [The DNN kernel contract] in
// ops/dnn_kernels.h).

#include <array>
#include <limits>
#include <utility>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/blocked.h"
#include "strata/nn/functional.h"
#include "strata/ops/checks.h"
#include "strata/ops/dnn_kernels.h"
#include "strata/tensor/autocast.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"

namespace strata::nn::functional {

namespace {

const ops::KernelSlot<ops::Conv2dFn> conv2d_slot("conv2d");
const ops::KernelSlot<ops::Conv2dBackwardFn> conv2d_backward_slot("conv2d_backward");
const ops::KernelSlot<ops::Conv2dFn> conv2d_blocked_slot("conv2d_blocked");
const ops::KernelSlot<ops::Conv2dBackwardFn> conv2d_blocked_backward_slot("conv2d_blocked_backward");

/// What check_conv finds: the kernel's parameters and the output's shape.
struct CheckedConv {
  ops::Conv2dParams params;
  Shape out_shape;
};

// `in_shape` is the input's NCHW shape: its own, or that of a blocked input [N, C/b, H, W, b] (conv2d_blocked).
CheckedConv check_conv(const char* op, const Tensor& input, const Shape& in_shape, const Tensor& weight,
                       const Tensor& bias, Pair stride, Pair padding, Pair dilation, int64_t groups) {
  STRATA_CHECK(input.defined() && weight.defined(), InvalidArgumentError,
               "{}: the input and the weight must be defined tensors", op);
  const TensorView iv = input.view(), wv = weight.view();
  if (bias.defined()) {
    const TensorView bv = bias.view();
    ops::check_same_device(op, {&iv, &wv, &bv});
  } else {
    ops::check_same_device(op, {&iv, &wv});
  }
  STRATA_CHECK(in_shape.size() == 4, ShapeError, "{}: expected a 4-D input [N, C, H, W], got shape {}", op,
               input.shape());
  STRATA_CHECK(weight.dim() == 4, ShapeError, "{}: expected a 4-D weight [O, C/groups, kH, kW], got shape {}", op,
               weight.shape());
  STRATA_CHECK(is_floating(input.dtype()), DTypeError,
               "{}: {} inputs are not supported; convolutions take floating tensors (convert with .to(DType::F32))",
               op, input.dtype());
  STRATA_CHECK(weight.dtype() == input.dtype(), DTypeError, "{}: the weight has dtype {} but the input has {}", op,
               weight.dtype(), input.dtype());
  STRATA_CHECK(groups >= 1, InvalidArgumentError, "{}: groups must be positive, got {}", op, groups);
  STRATA_CHECK(stride.h >= 1 && stride.w >= 1, InvalidArgumentError, "{}: stride must be positive, got ({}, {})", op,
               stride.h, stride.w);
  STRATA_CHECK(padding.h >= 0 && padding.w >= 0, InvalidArgumentError,
               "{}: padding must be non-negative, got ({}, {})", op, padding.h, padding.w);
  STRATA_CHECK(dilation.h >= 1 && dilation.w >= 1, InvalidArgumentError,
               "{}: dilation must be positive, got ({}, {})", op, dilation.h, dilation.w);
  // The window arithmetic below is in int64, and every backend takes these as int.
  for (const auto& [what, p] : {std::pair{"stride", stride}, {"padding", padding}, {"dilation", dilation}}) {
    STRATA_CHECK(p.h <= std::numeric_limits<int32_t>::max() && p.w <= std::numeric_limits<int32_t>::max(),
                 NotImplementedError, "{}: {} ({}, {}) is larger than 2^31-1", op, what, p.h, p.w);
  }
  const int64_t c = in_shape[1], h = in_shape[2], w = in_shape[3];
  const int64_t o = weight.size(0), kh = weight.size(2), kw = weight.size(3);
  STRATA_CHECK(c >= 1 && h >= 1 && w >= 1, ShapeError, "{}: the input of shape {} has an empty channel or spatial dim",
               op, input.shape());
  STRATA_CHECK(o >= 1 && kh >= 1 && kw >= 1, ShapeError, "{}: the weight of shape {} has an empty dim", op,
               weight.shape());
  STRATA_CHECK(c % groups == 0, ShapeError, "{}: groups = {} does not divide the {} input channels of shape {}", op,
               groups, c, input.shape());
  STRATA_CHECK(o % groups == 0, ShapeError,
               "{}: groups = {} does not divide the {} output channels of the weight of shape {}", op, groups, o,
               weight.shape());
  STRATA_CHECK(weight.size(1) * groups == c, ShapeError,
               "{}: the weight of shape {} with groups = {} expects {} input channels, but the input of shape {} has "
               "{}",
               op, weight.shape(), groups, weight.size(1) * groups, input.shape(), c);
  if (bias.defined()) {
    STRATA_CHECK(bias.dtype() == input.dtype(), DTypeError, "{}: the bias has dtype {} but the input has {}", op,
                 bias.dtype(), input.dtype());
    STRATA_CHECK(bias.dim() == 1 && bias.size(0) == o, ShapeError,
                 "{}: expected a bias of shape [{}] (one per output channel), got {}", op, o, bias.shape());
  }
  const int64_t span_h = dilation.h * (kh - 1) + 1, span_w = dilation.w * (kw - 1) + 1;
  STRATA_CHECK(span_h <= h + 2 * padding.h && span_w <= w + 2 * padding.w, ShapeError,
               "{}: the kernel ({}x{}, {}x{} with dilation) is larger than the padded input ({}x{}: shape {} with "
               "padding ({}, {}))",
               op, kh, kw, span_h, span_w, h + 2 * padding.h, w + 2 * padding.w, input.shape(), padding.h,
               padding.w);
  CheckedConv conv;
  conv.params = {stride.h, stride.w, padding.h, padding.w, dilation.h, dilation.w, groups, false, allow_tf32()};
  conv.out_shape = {in_shape[0], o, ops::window_output_size(h, kh, stride.h, padding.h, dilation.h),
                    ops::window_output_size(w, kw, stride.w, padding.w, dilation.w)};
  return conv;
}

TensorView no_tensor(DType dtype, Device device) {
  TensorView v;
  v.dtype = dtype;
  v.device = device;
  return v;
}

// grad_input, grad_weight and grad_bias (each only when `wanted`) from the gradient of conv's output.
std::vector<Tensor> conv_grads(const char* op, const Tensor& g, const Tensor& input, const Tensor& weight,
                               const ops::Conv2dParams& params, std::array<bool, 3> wanted) {
  const bool blocked = params.src_block != 0 || params.dst_block != 0;
  const Tensor dy = g.contiguous();
  // Named as the backward it is (the profiler's tables and messages), as relu_backward and max_pool2d_backward are.
  const ops::OpCall call =
      detail::op_call(std::string_view(op) == "conv2d_relu" ? "conv2d_relu_backward" : "conv2d_backward",
                      input.device());
  const TensorOptions options = TensorOptions(weight.dtype()).device(weight.device());
  if (dy.numel() == 0) {  // an empty batch: the weight and bias gradients are sums of nothing
    return {wanted[0] ? zeros(input.shape(), options) : Tensor(), wanted[1] ? zeros(weight.shape(), options) : Tensor(),
            wanted[2] ? zeros({weight.size(0)}, options) : Tensor()};
  }
  Tensor gi, gw, gb;
  if (wanted[0]) gi = empty(input.shape(), options);
  if (wanted[1] || wanted[2]) gw = empty(weight.shape(), options);  // the kernel computes grad_bias beside it
  if (wanted[2]) gb = empty({weight.size(0)}, options);
  const auto view = [&](const Tensor& t) { return t.defined() ? t.view() : no_tensor(g.dtype(), g.device()); };
  (blocked ? conv2d_blocked_backward_slot : conv2d_backward_slot)
      .get(input.device())(call, view(gi), view(gw), view(gb), dy.view(), input.view(), weight.view(), params);
  return {wanted[0] ? gi : Tensor(), wanted[1] ? gw : Tensor(), gb};
}

// `in_block` and `out_block` are the layouts of the input and the output: 0 for NCHW, b for [N, C/b, H, W, b].
Tensor convolution(const char* op, const Tensor& input_arg, const Tensor& weight_arg, const Tensor& bias_arg,
                   Pair stride, Pair padding, Pair dilation, int64_t groups, bool relu, int64_t in_block = 0,
                   int64_t out_block = 0) {
  CheckedConv conv = check_conv(op, input_arg, blocked::nchw_shape(op, input_arg, in_block), weight_arg, bias_arg,
                                stride, padding, dilation, groups);
  conv.params.relu = relu;
  conv.params.src_block = in_block;
  conv.params.dst_block = out_block;
  if (out_block != 0) {
    STRATA_CHECK(conv.out_shape[1] % out_block == 0, ShapeError,
                 "{}: {} output channels do not fill blocks of {}", op, conv.out_shape[1], out_block);
    conv.out_shape = {conv.out_shape[0], conv.out_shape[1] / out_block, conv.out_shape[2], conv.out_shape[3],
                      out_block};
  }
  const bool blocked = in_block != 0 || out_block != 0;
  const Tensor input = input_arg.contiguous(), weight = weight_arg.contiguous();
  const Tensor bias = bias_arg.defined() ? bias_arg.contiguous() : Tensor();
  Tensor out = empty(conv.out_shape, TensorOptions(input.dtype()).device(input.device()));
  if (out.numel() > 0) {
    (blocked ? conv2d_blocked_slot : conv2d_slot)
        .get(input.device())(detail::op_call(op, input.device()), out.view(), input.view(), weight.view(),
                             bias.defined() ? bias.view() : no_tensor(input.dtype(), input.device()), conv.params);
  }
  const bool with_bias = bias_arg.defined();
  if (with_bias ? detail::needs_grad({&input_arg, &weight_arg, &bias_arg})
                : detail::needs_grad({&input_arg, &weight_arg})) {
    const std::array<bool, 3> wanted{input_arg.requires_grad(), weight_arg.requires_grad(),
                                     with_bias && bias_arg.requires_grad()};
    ops::Conv2dParams params = conv.params;
    params.relu = false;
    // The ReLU's mask comes from the output; a handle without autograd state avoids a cycle output -> node -> output.
    const Tensor result = relu ? out.detach() : Tensor();
    BackwardFn backward = [op, input, weight, params, wanted, result, with_bias](const Tensor& g) {
      const Tensor dy = result.defined() ? detail::relu_backward(g, result) : g;
      std::vector<Tensor> grads = conv_grads(op, dy, input, weight, params, wanted);
      if (!with_bias) grads.pop_back();
      return grads;
    };
    const detail::Saves saves = relu ? detail::Saves::kInputsAndOutput : detail::Saves::kInputs;
    if (with_bias) {
      detail::record(op, {&input_arg, &weight_arg, &bias_arg}, out, std::move(backward), saves);
    } else {
      detail::record(op, {&input_arg, &weight_arg}, out, std::move(backward), saves);
    }
  }
  return out;
}

/// Autocast's operands of a convolution: the low-precision dtype on GPUs; f32 on the CPU, which has no f16 or bf16
/// convolution kernel (PyTorch runs them in bf16 there through oneDNN), so a bf16 input from a product goes back.
std::optional<std::array<Tensor, 4>> autocast_operands(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  if (input.defined() && input.device().is_cpu()) return amp::detail::f32_operands({&input, &weight, &bias});
  return amp::detail::low_precision_operands({&input, &weight, &bias});
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding,
              Pair dilation, int64_t groups) {
  if (auto cast = autocast_operands(input, weight, bias)) {
    return conv2d((*cast)[0], (*cast)[1], (*cast)[2], stride, padding, dilation, groups);
  }
  return convolution("conv2d", input, weight, bias, stride, padding, dilation, groups, false);
}

Tensor conv2d_relu(const Tensor& input, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding,
                   Pair dilation, int64_t groups) {
  if (auto cast = autocast_operands(input, weight, bias)) {
    return conv2d_relu((*cast)[0], (*cast)[1], (*cast)[2], stride, padding, dilation, groups);
  }
  return convolution("conv2d_relu", input, weight, bias, stride, padding, dilation, groups, true);
}

}  // namespace strata::nn::functional

namespace strata::nn::blocked {

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding, Pair dilation,
              int64_t groups, int64_t in_block, int64_t block) {
  STRATA_CHECK(block > 0 && (in_block == 0 || in_block == block), InvalidArgumentError,
               "conv2d: blocks of {} in and {} out are not a blocked layout", in_block, block);
  return functional::convolution("conv2d", input, weight, bias, stride, padding, dilation, groups, false, in_block,
                                 block);
}

}  // namespace strata::nn::blocked
