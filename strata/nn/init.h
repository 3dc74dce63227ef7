#pragma once

// Parameter initialisers (torch.nn.init). Each fills its tensor in place, on whatever device it lives, from that
// device's default generator (so manual_seed makes them reproducible), without recording autograd, and returns it.

#include <cstdint>
#include <utility>

#include "strata/tensor/tensor.h"

namespace strata::nn::init {

/// Which fan kaiming_* scales by: fan_in preserves the forward pass's variance, fan_out the backward pass's.
enum class FanMode { FanIn, FanOut };
/// The nonlinearity that follows the initialised layer, for the recommended gain.
enum class Nonlinearity { Linear, Conv, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };

/// PyTorch's calculate_gain: 1 for linear/conv/sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2/(1+a^2)) for leaky
/// relu with negative slope `param`, 3/4 for selu.
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);
/// (fan_in, fan_out) of a weight [out, in, k...]: in * prod(k) and out * prod(k). Needs at least 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

/// Uniform in [low, high).
Tensor uniform_(Tensor tensor, double low = 0.0, double high = 1.0);
/// Normal with the given mean and standard deviation.
Tensor normal_(Tensor tensor, double mean = 0.0, double std = 1.0);
Tensor constant_(Tensor tensor, double value);
Tensor zeros_(Tensor tensor);
Tensor ones_(Tensor tensor);
/// Glorot uniform: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor tensor, double gain = 1.0);
/// Glorot normal: N(0, gain^2 * 2 / (fan_in + fan_out)).
Tensor xavier_normal_(Tensor tensor, double gain = 1.0);
/// He uniform: U(-b, b) with b = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a). Linear and Conv2d
/// use a = sqrt(5) with LeakyReLU, which gives b = 1 / sqrt(fan_in).
Tensor kaiming_uniform_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);
/// He normal: N(0, (gain / sqrt(fan))^2).
Tensor kaiming_normal_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                       Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);

}  // namespace strata::nn::init
