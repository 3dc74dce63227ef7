#pragma once

#include <optional>
#include <vector>

#include "strata/optim/optimizer.h"

namespace strata::optim {

struct AdamOptions {
  double lr;
  double beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8;
  std::optional<double> weight_decay_;  // unset: PyTorch's default, 0 for Adam and 0.01 for AdamW
  AdamOptions(double lr_ = 1e-3) : lr(lr_) {}  // NOLINT: Adam(params, 1e-3) reads like PyTorch
  AdamOptions& betas(double b1, double b2) { beta1_ = b1; beta2_ = b2; return *this; }
  AdamOptions& eps(double e) { eps_ = e; return *this; }
  AdamOptions& weight_decay(double w) { weight_decay_ = w; return *this; }
};

/// Adam with PyTorch's update: t += 1; g = grad (+ wd * p, L2 penalty); m = b1 m + (1 - b1) g;
/// v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
/// State per parameter: "exp_avg", "exp_avg_sq", "step".
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  /// Groups with their own learning rate or weight decay; the rest from `options`.
  Adam(std::vector<ParamGroup> groups, const AdamOptions& options = {});
  void step() override;
  const AdamOptions& options() const { return options_; }

 protected:
  /// decoupled: AdamW's p *= 1 - lr * wd instead of adding wd * p to the gradient.
  Adam(const char* name, std::vector<ParamGroup> groups, const AdamOptions& options, bool decoupled);
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  bool counts_steps() const override { return true; }

 private:
  AdamOptions options_;
  double weight_decay_;
  bool decoupled_;
};

/// Adam with decoupled weight decay (Loshchilov & Hutter): p *= 1 - lr * wd before the Adam update; wd defaults to
/// 0.01 as in PyTorch.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamOptions& options = {});
  AdamW(std::vector<ParamGroup> groups, const AdamOptions& options = {});
};

}  // namespace strata::optim
