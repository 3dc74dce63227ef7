#pragma once

// Optimizers (torch.optim): they hold handles to the parameters, so Module::to, which moves parameters in place,
// never invalidates them. Per-parameter state is created lazily on the parameter's current device at its first
// step and follows the parameter when it later moves.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/module.h"
#include "strata/tensor/tensor.h"

namespace strata::optim {

/// The state one optimizer keeps for one parameter: named tensors (momentum_buffer, exp_avg...) and a step count.
struct ParamState {
  std::map<std::string, Tensor> tensors;
  int64_t step = 0;
};

/// Base of the optimizers: the parameters, the learning rate, and per-parameter state that can be saved and
/// restored exactly.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Updates every parameter that has a gradient, without recording autograd.
  virtual void step() = 0;
  /// Clears the parameters' gradients: drops them (`set_to_none`, PyTorch's default) or fills them with 0.
  void zero_grad(bool set_to_none = true);

  /// "SGD", "Adam": how errors name this optimizer.
  const std::string& name() const { return name_; }
  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }
  /// The state of parameter i (empty before its first step).
  const ParamState& state(std::size_t i) const {
    STRATA_CHECK(i < state_.size(), IndexError, "{}: state({}) asked of an optimizer with {} parameters", name_, i,
                 state_.size());
    return state_[i];
  }

  /// "lr" (f64 scalar) and, for each parameter i with state, "i.<name>" for its tensors and "i.step" (i64 scalar).
  /// The tensors are copies, so the dict stays as it was while training goes on.
  nn::StateDict state_dict() const;
  /// Restores what state_dict() saved, placing each tensor on its parameter's device. Keys and shapes are checked
  /// first (InvalidArgumentError listing every problem); nothing is modified when one is wrong.
  void load_state_dict(const nn::StateDict& dict);

 protected:
  /// Checks the parameters (defined, floating, requiring grad) and the learning rate.
  Optimizer(std::string name, std::vector<Tensor> params, double lr);
  /// Parameter i's state, with its tensors moved to the parameter's device and dtype when the parameter has moved.
  ParamState& state_for(std::size_t i);
  /// The names of the per-parameter state tensors this optimizer keeps (for load_state_dict's checks).
  virtual std::vector<std::string> state_names() const = 0;
  /// Whether the optimizer keeps a step count per parameter (saved as "i.step").
  virtual bool counts_steps() const { return false; }

 private:
  std::string name_;
  std::vector<Tensor> params_;
  std::vector<ParamState> state_;
  double lr_;
};

namespace detail {
/// self *= factor in place (the tensors layer's in-place ops take tensors, so the factor becomes a 0-dim tensor).
void scale_(Tensor& self, double factor);
}  // namespace detail

}  // namespace strata::optim
