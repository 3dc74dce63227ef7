#pragma once

// LibTorch's options structs for nn::functional (F::conv2d(x, w, F::Conv2dFuncOptions().stride(2))): each names the
// arguments after the tensors, with the defaults of the positional form in functional.h, and setters that chain.

#include <cstdint>
#include <optional>

#include "strata/nn/functional.h"

namespace strata::nn::functional {

struct Conv2dFuncOptions {
  Tensor bias_;
  Pair stride_ = 1, padding_ = 0, dilation_ = 1;
  int64_t groups_ = 1;
  Conv2dFuncOptions& bias(const Tensor& b) { bias_ = b; return *this; }
  Conv2dFuncOptions& stride(Pair s) { stride_ = s; return *this; }
  Conv2dFuncOptions& padding(Pair p) { padding_ = p; return *this; }
  Conv2dFuncOptions& dilation(Pair d) { dilation_ = d; return *this; }
  Conv2dFuncOptions& groups(int64_t g) { groups_ = g; return *this; }
};

struct MaxPool2dFuncOptions {
  Pair kernel_size_;
  std::optional<Pair> stride_;  // unset: the kernel size
  Pair padding_ = 0;
  MaxPool2dFuncOptions(Pair kernel_size) : kernel_size_(kernel_size) {}  // NOLINT: as LibTorch's
  MaxPool2dFuncOptions& stride(Pair s) { stride_ = s; return *this; }
  MaxPool2dFuncOptions& padding(Pair p) { padding_ = p; return *this; }
};

struct BatchNormFuncOptions {
  Tensor weight_, bias_;
  bool training_ = false;
  double momentum_ = 0.1, eps_ = 1e-5;
  BatchNormFuncOptions& weight(const Tensor& w) { weight_ = w; return *this; }
  BatchNormFuncOptions& bias(const Tensor& b) { bias_ = b; return *this; }
  BatchNormFuncOptions& training(bool t) { training_ = t; return *this; }
  BatchNormFuncOptions& momentum(double m) { momentum_ = m; return *this; }
  BatchNormFuncOptions& eps(double e) { eps_ = e; return *this; }
};

struct CrossEntropyFuncOptions {
  Reduction reduction_ = Reduction::Mean;
  double label_smoothing_ = 0.0;
  int64_t ignore_index_ = kIgnoreIndex;
  CrossEntropyFuncOptions& reduction(Reduction r) { reduction_ = r; return *this; }
  CrossEntropyFuncOptions& label_smoothing(double ls) { label_smoothing_ = ls; return *this; }
  CrossEntropyFuncOptions& ignore_index(int64_t i) { ignore_index_ = i; return *this; }
};

}  // namespace strata::nn::functional
