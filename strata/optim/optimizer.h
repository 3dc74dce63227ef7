#pragma once

// Optimizers (torch.optim): they hold handles to the parameters, so Module::to, which moves parameters in place,
// never invalidates them. Per-parameter state is created lazily on the parameter's current device at its first
// step and follows the parameter when it later moves.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
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

/// Parameters that share a learning rate and weight decay (PyTorch's param_groups):
/// SGD({{.params = weights, .weight_decay = 1e-4}, {.params = biases, .lr = 0.1}}, 0.01).
/// Only these two options vary by group; momentum, betas and the rest are the optimizer's for every group.
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr = std::nullopt;            // unset: the optimizer's options
  std::optional<double> weight_decay = std::nullopt;  // unset: the optimizer's options
};

/// Base of the optimizers: the parameters in groups, each group's learning rate, and per-parameter state that can be
/// saved and restored exactly. Parameters are numbered across the groups in order, as state(i) and the state
/// dict's keys do.
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
  /// The learning rate of group 0 (of every group when there is one).
  double lr() const { return groups_.front().lr; }
  /// Sets every group's learning rate to `lr`.
  void set_lr(double lr);
  /// Every parameter, group after group.
  const std::vector<Tensor>& params() const { return params_; }

  /// Parameters [begin, end) of params() and their options.
  struct Group {
    std::size_t begin = 0, end = 0;
    double lr = 0.0;
    std::optional<double> weight_decay;  // unset: the optimizer's
  };
  const std::vector<Group>& groups() const { return groups_; }
  /// Adds a group after construction (PyTorch's add_param_group), as fine-tuning does when it unfreezes layers. Its
  /// parameters are checked as the constructor's are, and a group without its own learning rate takes the one the
  /// optimizer was made with. Nothing changes when the group is refused. A scheduler made before leaves the new
  /// group's learning rate alone, as PyTorch's do: it schedules the groups it was made with.
  void add_param_group(ParamGroup group);
  void set_group_lr(std::size_t group, double lr);
  void set_group_weight_decay(std::size_t group, std::optional<double> weight_decay);
  /// The state of parameter i (empty before its first step).
  const ParamState& state(std::size_t i) const {
    STRATA_CHECK(i < state_.size(), IndexError, "{}: state({}) asked of an optimizer with {} parameters", name_, i,
                 state_.size());
    return state_[i];
  }

  /// "lr" (f64 scalar; group 0's), "lr.<g>" for each further group g, and, for each parameter i with state,
  /// "i.<name>" for its tensors and "i.step" (i64 scalar).
  /// The tensors are copies, so the dict stays as it was while training goes on.
  nn::StateDict state_dict() const;
  /// Restores what state_dict() saved, placing each tensor on its parameter's device. Keys and shapes are checked
  /// first (InvalidArgumentError listing every problem); nothing is modified when one is wrong.
  void load_state_dict(const nn::StateDict& dict);

 protected:
  /// Checks the parameters (defined, floating, requiring grad), the learning rates and weight decays; a group
  /// without its own learning rate takes `lr`.
  Optimizer(std::string name, std::vector<ParamGroup> groups, double lr);
  /// The group of parameter i.
  const Group& group_of(std::size_t i) const;
  /// Parameter i's state, with its tensors moved to the parameter's device and dtype when the parameter has moved.
  ParamState& state_for(std::size_t i);
  /// The names of the per-parameter state tensors this optimizer keeps (for load_state_dict's checks).
  virtual std::vector<std::string> state_names() const = 0;
  /// Whether the optimizer keeps a step count per parameter (saved as "i.step").
  virtual bool counts_steps() const { return false; }

 private:
  /// Checks a group and appends it (the constructor and add_param_group).
  void append_group(ParamGroup group);

  std::string name_;
  double default_lr_;  // for groups without their own learning rate
  std::vector<Tensor> params_;
  std::vector<ParamState> state_;
  std::vector<Group> groups_;
};

namespace detail {
/// self *= factor in place (the tensors layer's in-place ops take tensors, so the factor becomes a 0-dim tensor).
void scale_(Tensor& self, double factor);
}  // namespace detail

}  // namespace strata::optim
