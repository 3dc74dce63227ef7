#include "strata/optim/optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::optim {

namespace detail {

void scale_(Tensor& self, double factor) {
  if (factor == 1.0) return;
  mul_(self, scalar_tensor(factor, TensorOptions(self.dtype()).device(self.device())));
}

}  // namespace detail

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, double lr)
    : name_(std::move(name)), default_lr_(lr) {
  STRATA_CHECK(!groups.empty(), InvalidArgumentError, "{}: got no parameter groups", name_);
  const bool any = std::any_of(groups.begin(), groups.end(), [](const ParamGroup& g) { return !g.params.empty(); });
  STRATA_CHECK(any, InvalidArgumentError, "{}: got an empty parameter list", name_);
  for (ParamGroup& group : groups) append_group(std::move(group));
}

void Optimizer::add_param_group(ParamGroup group) {
  STRATA_CHECK(!group.params.empty(), InvalidArgumentError, "{}: add_param_group: the group has no parameters",
               name_);
  append_group(std::move(group));
}

void Optimizer::append_group(ParamGroup group) {
  // Everything is checked before anything changes, so a group that is refused leaves the optimizer as it was.
  const std::size_t g = groups_.size(), first = params_.size();
  const Group range{first, first + group.params.size(), group.lr.value_or(default_lr_), group.weight_decay};
  STRATA_CHECK(range.lr >= 0.0 && std::isfinite(range.lr), InvalidArgumentError,
               "{}: the learning rate of group {} must be >= 0, got {}", name_, g, range.lr);
  STRATA_CHECK(!group.weight_decay || (*group.weight_decay >= 0.0 && std::isfinite(*group.weight_decay)),
               InvalidArgumentError, "{}: the weight_decay of group {} must be a finite number >= 0, got {}", name_, g,
               group.weight_decay.value_or(0.0));
  const auto param = [&](std::size_t i) -> const Tensor& { return i < first ? params_[i] : group.params[i - first]; };
  for (std::size_t i = first; i < range.end; ++i) {
    const Tensor& p = param(i);
    STRATA_CHECK(p.defined(), InvalidArgumentError, "{}: parameter {} is undefined", name_, i);
    STRATA_CHECK(is_floating(p.dtype()), DTypeError, "{}: parameter {} has dtype {}; only floating tensors can be "
                 "optimised", name_, i, p.dtype());
    STRATA_CHECK(p.is_leaf(), InvalidArgumentError,
                 "{}: parameter {} is not a leaf tensor (it was computed by {}); optimise the leaves", name_, i,
                 p.grad_fn_name());
    // A parameter listed twice (in one group or in two) would be stepped twice per step.
    for (std::size_t j = 0; j < i; ++j) {
      STRATA_CHECK(!param(j).is_same(p), InvalidArgumentError, "{}: parameters {} and {} are the same tensor", name_,
                   j, i);
    }
  }
  for (Tensor& p : group.params) params_.push_back(std::move(p));
  groups_.push_back(range);
  state_.resize(params_.size());
}

const Optimizer::Group& Optimizer::group_of(std::size_t i) const {
  for (const Group& g : groups_) {
    if (i < g.end) return g;
  }
  STRATA_THROW(IndexError, "{}: parameter {} asked of an optimizer with {} parameters", name_, i, params_.size());
}

void Optimizer::set_lr(double lr) {
  for (std::size_t g = 0; g < groups_.size(); ++g) set_group_lr(g, lr);
}

void Optimizer::set_group_lr(std::size_t group, double lr) {
  STRATA_CHECK(group < groups_.size(), IndexError, "{}: group {} asked of an optimizer with {} groups", name_, group,
               groups_.size());
  STRATA_CHECK(lr >= 0.0 && std::isfinite(lr), InvalidArgumentError, "{}: the learning rate must be >= 0, got {}",
               name_, lr);
  groups_[group].lr = lr;
}

void Optimizer::set_group_weight_decay(std::size_t group, std::optional<double> weight_decay) {
  STRATA_CHECK(group < groups_.size(), IndexError, "{}: group {} asked of an optimizer with {} groups", name_, group,
               groups_.size());
  STRATA_CHECK(!weight_decay || (*weight_decay >= 0.0 && std::isfinite(*weight_decay)), InvalidArgumentError,
               "{}: weight_decay must be a finite number >= 0, got {}", name_, weight_decay.value_or(0.0));
  groups_[group].weight_decay = weight_decay;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (Tensor& p : params_) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      g.fill_(0);
    }
  }
}

ParamState& Optimizer::state_for(std::size_t i) {
  ParamState& s = state_[i];
  const Tensor& p = params_[i];
  for (auto& [name, t] : s.tensors) {
    if (t.device() != p.device()) t = t.to(p.device());
    if (t.dtype() != p.dtype()) t = t.to(p.dtype());
  }
  return s;
}

nn::StateDict Optimizer::state_dict() const {
  nn::StateDict dict;
  dict.insert("lr", scalar_tensor(groups_.front().lr, DType::F64));
  for (std::size_t g = 1; g < groups_.size(); ++g) {
    dict.insert(fmt::format("lr.{}", g), scalar_tensor(groups_[g].lr, DType::F64));
  }
  for (std::size_t i = 0; i < state_.size(); ++i) {
    const ParamState& s = state_[i];
    for (const auto& [name, t] : s.tensors) dict.insert(fmt::format("{}.{}", i, name), t.clone());
    if (counts_steps() && s.step > 0) dict.insert(fmt::format("{}.step", i), scalar_tensor(s.step, DType::I64));
  }
  return dict;
}

void Optimizer::load_state_dict(const nn::StateDict& dict) {
  const std::vector<std::string> names = state_names();
  std::vector<std::string> problems;
  std::vector<ParamState> loaded(params_.size());
  std::vector<double> lrs(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) lrs[g] = groups_[g].lr;
  for (std::size_t g = 1; g < groups_.size(); ++g) {
    if (!dict.contains(fmt::format("lr.{}", g))) problems.push_back(fmt::format("'lr.{}' is missing", g));
  }
  for (const auto& [key, t] : dict) {
    if (!t.defined()) {
      problems.push_back(fmt::format("'{}' is undefined", key));
      continue;
    }
    // "lr" is group 0's learning rate and "lr.<g>" group g's.
    std::size_t group = 0;
    bool is_lr = key == "lr";
    if (!is_lr && key.starts_with("lr.")) {
      const char* first = key.data() + 3;
      const char* last = key.data() + key.size();
      const auto [end, ec] = std::from_chars(first, last, group);
      is_lr = ec == std::errc() && end == last && group >= 1 && group < groups_.size();
    }
    if (is_lr) {
      if (t.numel() != 1) {
        problems.push_back(fmt::format("'{}' must hold one value, got shape {}", key, t.shape()));
      } else {
        const double lr = t.item<double>();
        if (!(lr >= 0.0 && std::isfinite(lr)) || !is_floating(t.dtype())) {
          problems.push_back(
              fmt::format("'{}' must be a finite floating-point number >= 0, got {} ({})", key, lr, t.dtype()));
        }
        lrs[group] = lr;
      }
      continue;
    }
    const auto dot = key.find('.');
    std::size_t index = 0;
    bool numeric = dot != std::string::npos && dot > 0;
    for (std::size_t c = 0; numeric && c < dot; ++c) numeric = key[c] >= '0' && key[c] <= '9';
    // Digits only, so the one failure left is a number too large, which no parameter index is either.
    if (numeric) numeric = std::from_chars(key.data(), key.data() + dot, index).ec == std::errc();
    if (!numeric || index >= params_.size()) {
      problems.push_back(fmt::format("unexpected key '{}' (this optimizer has {} parameters)", key, params_.size()));
      continue;
    }
    const std::string name = key.substr(dot + 1);
    if (name == "step" && counts_steps()) {
      if (t.numel() != 1) {
        problems.push_back(fmt::format("'{}' must hold one value, got shape {}", key, t.shape()));
      } else if (is_floating(t.dtype())) {
        problems.push_back(fmt::format("'{}' must hold an integer, got {}", key, t.dtype()));
      } else {
        loaded[index].step = t.item<int64_t>();
        // A step count is at most what one int64 can count up to: the next step must not overflow.
        if (loaded[index].step < 0 || loaded[index].step == std::numeric_limits<int64_t>::max()) {
          problems.push_back(
              fmt::format("'{}' is {}; a step count must be >= 0 and below 2^63-1", key, loaded[index].step));
        }
      }
    } else if (std::find(names.begin(), names.end(), name) != names.end()) {
      if (t.shape() != params_[index].shape()) {
        problems.push_back(fmt::format("'{}' has shape {} but parameter {} has shape {}", key, t.shape(), index,
                                       params_[index].shape()));
      } else {
        loaded[index].tensors[name] = t;
      }
    } else {
      problems.push_back(fmt::format("unexpected key '{}'", key));
    }
  }
  // A parameter's state is whole or absent: a step would otherwise find one moment and not the other, or moments
  // without the step count that their bias correction depends on (state_dict() writes both once a step was taken).
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    const auto& tensors = loaded[i].tensors;
    if (counts_steps() && !tensors.empty() && loaded[i].step == 0) {
      problems.push_back(fmt::format("parameter {} has {} but no step count: '{}.step' is {}", i,
                                     fmt::join(names, " and "), i,
                                     dict.contains(fmt::format("{}.step", i)) ? "0" : "missing"));
    }
    if (counts_steps() && tensors.empty() && loaded[i].step != 0) {
      problems.push_back(
          fmt::format("parameter {} has a step count ('{}.step') but no {}", i, i, fmt::join(names, " or ")));
    }
    if (tensors.empty() || tensors.size() == names.size()) continue;
    std::vector<std::string> missing;
    for (const std::string& n : names) {
      if (tensors.count(n) == 0) missing.push_back(fmt::format("'{}.{}'", i, n));
    }
    problems.push_back(fmt::format("parameter {} has part of its state: {} missing", i, fmt::join(missing, ", ")));
  }
  STRATA_CHECK(problems.empty(), InvalidArgumentError, "{}: load_state_dict: nothing was loaded:\n  {}", name_,
               fmt::join(problems, "\n  "));
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    for (auto& [name, t] : loaded[i].tensors) {
      // A private copy on the parameter's device: later steps must not write into the caller's dict.
      t = t.copy_to(params_[i].device()).to(params_[i].dtype());
    }
  }
  state_ = std::move(loaded);
  for (std::size_t g = 0; g < groups_.size(); ++g) groups_[g].lr = lrs[g];
}

}  // namespace strata::optim
