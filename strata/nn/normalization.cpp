// batch_norm, built from tensor ops only, so the same code runs on every device, recording its own derivative
// (Note [batch_norm's derivative]); and layer_norm, checked here and computed by one kernel per pass of the
// backends (Note [The layer_norm kernel contract] in ops/layer_norm_kernels.h), or composed from tensor ops as the
// tests' reference.

#include "strata/nn/normalization.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/ops/layer_norm_kernels.h"
#include "strata/tensor/autocast.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"

namespace strata::nn::functional {

namespace {

/// Every defined argument must live on the input's device (nothing is copied behind the user's back).
void check_device(const char* op, const Tensor& input, const char* name, const Tensor& t) {
  STRATA_CHECK(!t.defined() || t.device() == input.device(), DeviceMismatchError, "{}: input is on {} but {} is on {}",
               op, input.device(), name, t.device());
}

/// A per-channel parameter or statistic must be a vector of C values.
void check_per_channel(const char* op, const char* name, const Tensor& t, int64_t channels, const Shape& input_shape) {
  if (!t.defined()) return;
  STRATA_CHECK(t.dim() == 1 && t.size(0) == channels, ShapeError,
               "{}: {} must have shape [{}] (the channels, dim 1 of input shape {}), got {}", op, name, channels,
               input_shape, t.shape());
  STRATA_CHECK(is_floating(t.dtype()), DTypeError, "{}: {} must be a floating tensor, got {}", op, name, t.dtype());
}

/// A per-channel vector [C] as [1, C, 1], to broadcast against an input viewed as [N, C, S].
Tensor per_channel(const Tensor& t) { return t.reshape({1, t.numel(), 1}); }

/// Sum over N and S of x [N, C, S] -> [C]. The contiguous trailing dim goes first: the reduce kernels are many
/// times faster on trailing dims than on the strided reduction over {0, 2} at once.
Tensor channel_sum(const Tensor& x) { return x.size(2) == 1 ? sum(x.squeeze(2), {0}) : sum(sum(x, {2}), {0}); }

// Note [batch_norm's derivative]
// batch_norm records one derivative instead of composing mean/var/mul: composed, the gradients of weight and bias
// (and of the batch statistics) would be sums over the strided dims {0, 2, 3}, the slow case of the reduce kernels,
// and the chain would take about twice as many passes over the activations. With xhat = (x - mean) * rstd:
//   d bias = sum(g),  d weight = sum(g * xhat),
//   d x = w * rstd * (g - sum(g) / M - xhat * sum(g * xhat) / M)   (training: mean and rstd depend on x)
//   d x = w * rstd * g                                              (inference: the running statistics are constants)
// where sums run over N and the spatial dims and M is their count.
struct BatchNormSaved {
  Tensor centered;            // training: x - mean as [N, C, S]
  Tensor input;               // inference: x as [N, C, S]
  Tensor mean, rstd, weight;  // [C]; weight may be undefined
  Shape shape3;               // [N, C, S]
  double count = 0;
  bool training = true;
};

struct BatchNormGrads {
  Tensor input, weight, bias;
};

BatchNormGrads batch_norm_backward(const BatchNormSaved& s, const Tensor& g_out, bool need_input, bool need_weight,
                                   bool need_bias) {
  const Tensor& rstd = s.rstd;
  const Tensor g = g_out.reshape(s.shape3);
  BatchNormGrads grads;
  Tensor sum_g;
  if (need_bias || (need_input && s.training)) sum_g = channel_sum(g);
  if (need_bias) grads.bias = sum_g;
  Tensor sum_g_centered;  // sum(g * (x - mean)) = sum(g * xhat) / rstd
  if (need_weight || (need_input && s.training)) {
    const Tensor centered = s.training ? s.centered : s.input - per_channel(s.mean);
    sum_g_centered = channel_sum(g * centered);
  }
  if (need_weight) grads.weight = sum_g_centered * rstd;
  if (need_input) {
    const Tensor scale = s.weight.defined() ? rstd * s.weight.to(rstd.dtype()) : rstd;  // w * rstd
    grads.input = g * per_channel(scale);
    if (s.training) {
      const Tensor k_centered = -(scale * rstd * rstd * sum_g_centered / s.count);
      const Tensor k_const = -(scale * sum_g / s.count);
      grads.input = grads.input + s.centered * per_channel(k_centered) + per_channel(k_const);
    }
  }
  return grads;
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  constexpr const char* op = "batch_norm";
  STRATA_CHECK(input.defined(), InvalidArgumentError, "{}: the input tensor is undefined", op);
  STRATA_CHECK(is_floating(input.dtype()), DTypeError, "{}: input must be a floating tensor, got {}", op,
               input.dtype());
  STRATA_CHECK(input.dim() >= 2, ShapeError, "{}: input must be [N, C] or [N, C, ...] with channels in dim 1, got {}",
               op, input.shape());
  STRATA_CHECK(eps >= 0.0, InvalidArgumentError, "{}: eps must be non-negative, got {}", op, eps);
  // The running statistics become NaN for ever otherwise.
  STRATA_CHECK(momentum >= 0.0 && momentum <= 1.0, InvalidArgumentError, "{}: momentum must be in [0, 1], got {}", op,
               momentum);
  check_device(op, input, "running_mean", running_mean);
  check_device(op, input, "running_var", running_var);
  check_device(op, input, "weight", weight);
  check_device(op, input, "bias", bias);
  const int64_t channels = input.size(1);
  check_per_channel(op, "running_mean", running_mean, channels, input.shape());
  check_per_channel(op, "running_var", running_var, channels, input.shape());
  check_per_channel(op, "weight", weight, channels, input.shape());
  check_per_channel(op, "bias", bias, channels, input.shape());
  STRATA_CHECK(running_mean.defined() == running_var.defined(), InvalidArgumentError,
               "{}: pass both running_mean and running_var, or neither", op);

  const int64_t batch = input.size(0);
  const int64_t spatial = input.numel() / std::max<int64_t>(batch * channels, 1);
  const int64_t count = batch * spatial;  // values per channel
  STRATA_CHECK(!training || count > 1, InvalidArgumentError,
               "{}: expected more than 1 value per channel when training, got input shape {}", op, input.shape());
  STRATA_CHECK(training || running_mean.defined(), InvalidArgumentError,
               "{}: inference (training=false) needs running_mean and running_var", op);

  BatchNormSaved saved;
  saved.count = static_cast<double>(count);
  saved.shape3 = {batch, channels, spatial};
  saved.training = training;
  saved.weight = weight;
  Tensor out;
  {
    NoGradGuard no_grad;  // the derivative is recorded below (Note [batch_norm's derivative])
    const Tensor x = input.reshape(saved.shape3);
    Tensor mean_c, var_c;  // [C]
    if (training) {
      mean_c = channel_sum(x) / saved.count;
      saved.centered = x - per_channel(mean_c);
      var_c = channel_sum(saved.centered * saved.centered) / saved.count;
      if (running_mean.defined()) {
        Tensor rm = running_mean, rv = running_var;
        rm.copy_(rm * (1.0 - momentum) + mean_c * momentum);
        rv.copy_(rv * (1.0 - momentum) + var_c * (momentum * saved.count / (saved.count - 1.0)));
      }
    } else {
      // The running statistics are constants: y = x * scale + shift, two passes.
      saved.input = x;
      mean_c = running_mean.to(input.dtype());
      var_c = running_var.to(input.dtype());
    }
    saved.mean = mean_c;
    saved.rstd = rsqrt(var_c + eps);
    const Tensor scale = weight.defined() ? saved.rstd * weight : saved.rstd;
    if (training) {
      out = saved.centered * per_channel(scale);
      if (bias.defined()) out = out + per_channel(bias);
    } else {
      const Tensor shift = bias.defined() ? bias - mean_c * scale : -(mean_c * scale);
      out = x * per_channel(scale) + per_channel(shift);
    }
    out = out.reshape(input.shape());
  }

  std::vector<Tensor> inputs{input};
  if (weight.defined()) inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  if (detail::needs_grad_list(inputs)) {
    const bool need_input = input.requires_grad();
    const bool need_weight = weight.defined() && weight.requires_grad();
    const bool has_weight = weight.defined(), has_bias = bias.defined();
    const bool need_bias = has_bias && bias.requires_grad();
    auto backward = [saved, shape = input.shape(), dtype = input.dtype(), bias_ref = bias, need_input, need_weight,
                     need_bias, has_weight, has_bias](const Tensor& g) {
      const BatchNormGrads grads = batch_norm_backward(saved, g, need_input, need_weight, need_bias);
      std::vector<Tensor> result{need_input ? grads.input.reshape(shape).to(dtype) : Tensor()};
      if (has_weight) result.push_back(need_weight ? detail::grad_like(grads.weight, saved.weight) : Tensor());
      if (has_bias) result.push_back(need_bias ? detail::grad_like(grads.bias, bias_ref) : Tensor());
      return result;
    };
    detail::record_list(op, inputs, out, std::move(backward));
  }
  return out;
}

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return layer_norm(input, normalized_shape, weight, bias, eps, LayerNormImpl::kFused);
}

namespace {

const ops::KernelSlot<ops::LayerNormForwardFn> layer_norm_slot("layer_norm");
const ops::KernelSlot<ops::LayerNormBackwardFn> layer_norm_backward_slot("layer_norm_backward");

TensorView view_or_none(const Tensor& t) { return t.defined() ? t.view() : TensorView{}; }

/// The composition of tensor ops, differentiated by autograd: the tests' reference.
Tensor layer_norm_composed(const Tensor& input, int64_t k, const Tensor& weight, const Tensor& bias, double eps) {
  std::vector<int64_t> dims;
  for (int64_t d = input.dim() - k; d < input.dim(); ++d) dims.push_back(d);
  const Tensor mu = mean(input, dims, /*keepdim=*/true);
  const Tensor rstd = rsqrt(var(input, dims, /*unbiased=*/false, /*keepdim=*/true) + eps);
  Tensor out = (input - mu) * rstd;
  if (weight.defined()) out = out * weight;
  if (bias.defined()) out = out + bias;
  return out;
}

// Note [layer_norm's derivative]
// The fused path records one node for x, weight and bias whose backward is the backend's layer_norm_backward
// kernel, reading the mean and rstd that the forward kernel saved. Its inputs are what the kernel read: the input
// (and weight and bias) converted to the result's dtype, made contiguous and viewed as [rows, n]; those conversions
// are ops, so autograd carries the gradients back through them to the caller's tensors. As with every derivative
// here, the backward pass is not itself recorded (autograd::grad has no create_graph), so there is no second
// derivative to provide.
Tensor layer_norm_fused(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                        double eps) {
  constexpr const char* op = "layer_norm";
  // The dtype the composition gives: the input's, promoted with weight's and bias's.
  DType dtype = input.dtype();
  if (weight.defined()) dtype = promote_types(dtype, weight.dtype());
  if (bias.defined()) dtype = promote_types(dtype, bias.dtype());
  int64_t n = 1;
  for (int64_t s : normalized_shape) n *= s;
  const int64_t rows = input.numel() / n;
  const Device device = input.device();
  const Tensor x = input.to(dtype).contiguous().reshape({rows, n});
  const Tensor w = weight.defined() ? weight.to(dtype).contiguous().reshape({n}) : Tensor();
  const Tensor b = bias.defined() ? bias.to(dtype).contiguous().reshape({n}) : Tensor();
  const TensorOptions stats = TensorOptions(dtype == DType::F64 ? DType::F64 : DType::F32).device(device);
  Tensor y = empty({rows, n}, TensorOptions(dtype).device(device));
  const Tensor mean_rows = empty({rows}, stats), rstd_rows = empty({rows}, stats);
  layer_norm_slot.get(device)(detail::op_call(op, device), y.view(), mean_rows.view(), rstd_rows.view(), x.view(),
                              view_or_none(w), view_or_none(b), eps);

  std::vector<Tensor> inputs{x};
  if (w.defined()) inputs.push_back(w);
  if (b.defined()) inputs.push_back(b);
  if (detail::needs_grad_list(inputs)) {
    const bool need_x = x.requires_grad(), need_w = w.defined() && w.requires_grad();
    const bool need_b = b.defined() && b.requires_grad();
    auto backward = [x = x.detach(), w = w.defined() ? w.detach() : Tensor(), mean_rows, rstd_rows, need_x, need_w,
                     need_b, has_w = w.defined(), has_b = b.defined()](const Tensor& g) {
      const Device device = x.device();
      const TensorOptions like = TensorOptions(x.dtype()).device(device);
      const Tensor go = g.to(x.dtype()).contiguous();
      Tensor gx = need_x ? empty(x.shape(), like) : Tensor();
      Tensor gw = need_w ? empty({x.size(1)}, like) : Tensor();
      Tensor gb = need_b ? empty({x.size(1)}, like) : Tensor();
      layer_norm_backward_slot.get(device)(detail::op_call("layer_norm_backward", device), view_or_none(gx),
                                           view_or_none(gw), view_or_none(gb), go.view(), x.view(), mean_rows.view(),
                                           rstd_rows.view(), view_or_none(w));
      std::vector<Tensor> grads{gx};
      if (has_w) grads.push_back(gw);
      if (has_b) grads.push_back(gb);
      return grads;
    };
    detail::record_list(op, inputs, y, std::move(backward));
  }
  return y.reshape(input.shape());
}

}  // namespace

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps, LayerNormImpl impl) {
  if (auto cast = amp::detail::f32_operands({&input, &weight, &bias})) {
    return layer_norm((*cast)[0], normalized_shape, (*cast)[1], (*cast)[2], eps, impl);
  }
  constexpr const char* op = "layer_norm";
  STRATA_CHECK(input.defined(), InvalidArgumentError, "{}: the input tensor is undefined", op);
  STRATA_CHECK(is_floating(input.dtype()), DTypeError, "{}: input must be a floating tensor, got {}", op,
               input.dtype());
  STRATA_CHECK(eps >= 0.0, InvalidArgumentError, "{}: eps must be non-negative, got {}", op, eps);
  const int64_t k = normalized_shape.ssize();
  STRATA_CHECK(k > 0, ShapeError, "{}: normalized_shape must name at least one trailing dim", op);
  bool matches = input.dim() >= k;
  for (int64_t i = 0; matches && i < k; ++i) matches = input.size(input.dim() - k + i) == normalized_shape[i];
  STRATA_CHECK(matches, ShapeError, "{}: normalized_shape {} does not match the trailing dims of input shape {}", op,
               normalized_shape, input.shape());
  check_device(op, input, "weight", weight);
  check_device(op, input, "bias", bias);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"weight", &weight}, {"bias", &bias}}) {
    if (!t->defined()) continue;
    STRATA_CHECK(t->shape() == normalized_shape, ShapeError, "{}: {} must have the normalized shape {}, got {}", op,
                 name, normalized_shape, t->shape());
    STRATA_CHECK(is_floating(t->dtype()), DTypeError, "{}: {} must be a floating tensor, got {}", op, name, t->dtype());
  }
  // An empty input has nothing for a kernel to do; the composition gives its empty result and gradients.
  if (impl == LayerNormImpl::kComposed || input.numel() == 0) {
    return layer_norm_composed(input, k, weight, bias, eps);
  }
  return layer_norm_fused(input, normalized_shape, weight, bias, eps);
}

}  // namespace strata::nn::functional
