#pragma once

#include <vector>

#include "strata/optim/optimizer.h"

namespace strata::optim {

struct SGDOptions {
  double lr;
  double momentum_ = 0.0, dampening_ = 0.0, weight_decay_ = 0.0;
  bool nesterov_ = false;
  SGDOptions(double lr_) : lr(lr_) {}  // NOLINT: SGD(params, 0.1) reads like PyTorch
  SGDOptions& momentum(double m) { momentum_ = m; return *this; }
  SGDOptions& dampening(double d) { dampening_ = d; return *this; }
  SGDOptions& weight_decay(double w) { weight_decay_ = w; return *this; }
  SGDOptions& nesterov(bool n) { nesterov_ = n; return *this; }
};

/// Stochastic gradient descent with PyTorch's update: g = grad + wd * p; with momentum, buf = g at the first step
/// and buf = momentum * buf + (1 - dampening) * g after, then g = g + momentum * buf (nesterov) or g = buf;
/// p -= lr * g. State per parameter: "momentum_buffer" (only with momentum).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  /// Groups with their own learning rate or weight decay; the rest from `options`.
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options);
  void step() override;
  const SGDOptions& options() const { return options_; }

 protected:
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }

 private:
  SGDOptions options_;
};

}  // namespace strata::optim
