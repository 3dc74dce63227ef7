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

Optimizer::Optimizer(std::string name, std::vector<Tensor> params, double lr)
    : name_(std::move(name)), params_(std::move(params)), state_(params_.size()), lr_(lr) {
  STRATA_CHECK(!params_.empty(), InvalidArgumentError, "{}: got an empty parameter list", name_);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    STRATA_CHECK(p.defined(), InvalidArgumentError, "{}: parameter {} is undefined", name_, i);
    STRATA_CHECK(is_floating(p.dtype()), DTypeError, "{}: parameter {} has dtype {}; only floating tensors can be "
                 "optimised", name_, i, p.dtype());
    STRATA_CHECK(p.is_leaf(), InvalidArgumentError,
                 "{}: parameter {} is not a leaf tensor (it was computed by {}); optimise the leaves", name_, i,
                 p.grad_fn_name());
    // A parameter listed twice would be stepped twice per step.
    for (std::size_t j = 0; j < i; ++j) {
      STRATA_CHECK(!params_[j].is_same(p), InvalidArgumentError, "{}: parameters {} and {} are the same tensor", name_,
                   j, i);
    }
  }
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  STRATA_CHECK(lr >= 0.0 && std::isfinite(lr), InvalidArgumentError, "{}: the learning rate must be >= 0, got {}",
               name_, lr);
  lr_ = lr;
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
  dict.insert("lr", scalar_tensor(lr_, DType::F64));
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
  double lr = lr_;
  for (const auto& [key, t] : dict) {
    if (!t.defined()) {
      problems.push_back(fmt::format("'{}' is undefined", key));
      continue;
    }
    if (key == "lr") {
      if (t.numel() != 1) {
        problems.push_back(fmt::format("'lr' must hold one value, got shape {}", t.shape()));
      } else {
        lr = t.item<double>();
        if (!(lr >= 0.0 && std::isfinite(lr)) || !is_floating(t.dtype())) {
          problems.push_back(
              fmt::format("'lr' must be a finite floating-point number >= 0, got {} ({})", lr, t.dtype()));
        }
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
  // A parameter's state is whole or absent: a step would otherwise find one moment and not the other.
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    const auto& tensors = loaded[i].tensors;
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
  lr_ = lr;
}

}  // namespace strata::optim
