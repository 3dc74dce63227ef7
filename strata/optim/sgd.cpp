#include "strata/optim/sgd.h"

#include <cmath>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/functions.h"

namespace strata::optim {

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : SGD(std::vector<ParamGroup>{ParamGroup{.params = std::move(params)}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& options)
    : Optimizer("SGD", std::move(groups), options.lr), options_(options) {
  // Finite as well: an infinite or NaN factor turns every parameter into NaN at the first step.
  STRATA_CHECK(options.momentum_ >= 0.0 && std::isfinite(options.momentum_), InvalidArgumentError,
               "SGD: momentum must be a finite number >= 0, got {}", options.momentum_);
  STRATA_CHECK(options.dampening_ >= 0.0 && std::isfinite(options.dampening_), InvalidArgumentError,
               "SGD: dampening must be a finite number >= 0, got {}", options.dampening_);
  STRATA_CHECK(options.weight_decay_ >= 0.0 && std::isfinite(options.weight_decay_), InvalidArgumentError,
               "SGD: weight_decay must be a finite number >= 0, got {}", options.weight_decay_);
  STRATA_CHECK(!options.nesterov_ || (options.momentum_ > 0.0 && options.dampening_ == 0.0), InvalidArgumentError,
               "SGD: nesterov needs momentum > 0 and dampening 0 (got momentum {}, dampening {})", options.momentum_,
               options.dampening_);
}

void SGD::step() {
  NoGradGuard no_grad;
  const auto& o = options_;
  for (std::size_t i = 0; i < params().size(); ++i) {
    Tensor p = params()[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    const Group& group = group_of(i);
    const double weight_decay = group.weight_decay.value_or(o.weight_decay_);
    if (weight_decay != 0.0) g = add(g, p, weight_decay);
    if (o.momentum_ != 0.0) {
      ParamState& s = state_for(i);
      auto it = s.tensors.find("momentum_buffer");
      if (it == s.tensors.end()) {
        it = s.tensors.emplace("momentum_buffer", g.clone()).first;
      } else {
        detail::scale_(it->second, o.momentum_);
        add_(it->second, g, 1.0 - o.dampening_);
      }
      g = o.nesterov_ ? add(g, it->second, o.momentum_) : it->second;
    }
    add_(p, g, -group.lr);
  }
}

}  // namespace strata::optim
