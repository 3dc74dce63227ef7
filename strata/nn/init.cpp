#include "strata/nn/init.h"

#include <cmath>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::nn::init {

namespace {

// Random numbers are drawn in f64 for f64 tensors and in f32 otherwise (f16/bf16 then round once in copy_).
TensorOptions draw_options(const Tensor& t) {
  return TensorOptions(t.dtype() == DType::F64 ? DType::F64 : DType::F32).device(t.device());
}

void check_floating(const Tensor& t, const char* op) {
  STRATA_CHECK(t.defined(), InvalidArgumentError, "init::{}: the tensor is undefined", op);
  STRATA_CHECK(is_floating(t.dtype()), DTypeError, "init::{}: needs a floating tensor, got {}", op, t.dtype());
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv:
    case Nonlinearity::Sigmoid: return 1.0;
    case Nonlinearity::Tanh: return 5.0 / 3.0;
    case Nonlinearity::ReLU: return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: return std::sqrt(2.0 / (1.0 + param * param));
    case Nonlinearity::SELU: return 3.0 / 4.0;
  }
  return 1.0;
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor) {
  STRATA_CHECK(tensor.dim() >= 2, ShapeError,
               "init: fan in and fan out need a tensor of at least 2 dims [out, in, ...], got {}", tensor.shape());
  int64_t receptive = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive *= tensor.size(d);
  return {tensor.size(1) * receptive, tensor.size(0) * receptive};
}

Tensor uniform_(Tensor tensor, double low, double high) {
  check_floating(tensor, "uniform_");
  STRATA_CHECK(std::isfinite(low) && std::isfinite(high), InvalidArgumentError,
               "init::uniform_: the bounds must be finite, got ({}, {})", low, high);
  STRATA_CHECK(low <= high, InvalidArgumentError, "init::uniform_: low ({}) must not exceed high ({})", low, high);
  NoGradGuard no_grad;
  tensor.copy_(rand(tensor.shape(), draw_options(tensor)) * (high - low) + low);
  return tensor;
}

Tensor normal_(Tensor tensor, double mean, double std) {
  check_floating(tensor, "normal_");
  STRATA_CHECK(std >= 0.0 && std::isfinite(std) && std::isfinite(mean), InvalidArgumentError,
               "init::normal_: mean must be finite and std finite and >= 0, got mean {} and std {}", mean, std);
  NoGradGuard no_grad;
  tensor.copy_(randn(tensor.shape(), draw_options(tensor)) * std + mean);
  return tensor;
}

Tensor constant_(Tensor tensor, double value) {
  STRATA_CHECK(tensor.defined(), InvalidArgumentError, "init::constant_: the tensor is undefined");
  NoGradGuard no_grad;
  tensor.fill_(value);
  return tensor;
}

Tensor zeros_(Tensor tensor) { return constant_(std::move(tensor), 0.0); }
Tensor ones_(Tensor tensor) { return constant_(std::move(tensor), 1.0); }

Tensor xavier_uniform_(Tensor tensor, double gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(std::move(tensor), -bound, bound);
}

Tensor xavier_normal_(Tensor tensor, double gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  return normal_(std::move(tensor), 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)));
}

namespace {

double kaiming_std(const Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  const int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  STRATA_CHECK(fan > 0, ShapeError, "init::kaiming: the tensor {} has a zero fan", tensor.shape());
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
}

}  // namespace

Tensor kaiming_uniform_(Tensor tensor, double a, FanMode mode, Nonlinearity nonlinearity) {
  const double bound = std::sqrt(3.0) * kaiming_std(tensor, a, mode, nonlinearity);
  return uniform_(std::move(tensor), -bound, bound);
}

Tensor kaiming_normal_(Tensor tensor, double a, FanMode mode, Nonlinearity nonlinearity) {
  const double std = kaiming_std(tensor, a, mode, nonlinearity);
  return normal_(std::move(tensor), 0.0, std);
}

}  // namespace strata::nn::init
