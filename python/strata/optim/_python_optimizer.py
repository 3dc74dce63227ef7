"""What the optimizers written in Python share. Their C++ base (strata._C.optim.PythonOptimizer) keeps the parameter
groups and per-parameter state, so param_groups, add_param_group, zero_grad, state_dict, load_state_dict and the
C++ schedulers work on them as on SGD and Adam; a subclass writes update(), in PyTorch's op order so that results
match PyTorch's to rounding."""
import strata
from strata import _C


def check_hyperparameter(name, value, low=0.0):
    if not (value >= low):  # also refuses NaN
        raise ValueError(f"Invalid {name} value: {value}")


class PythonOptimizer(_C.optim.PythonOptimizer):
    _unsupported = {"foreach": None, "capturable": False, "differentiable": False, "fused": None}

    def __init__(self, params, lr, state_names, options):
        for key, default in self._unsupported.items():
            if options.pop(key, default) not in (default, False):
                raise NotImplementedError(f"{type(self).__name__}: {key}= is not implemented; leave it at its default")
        check_hyperparameter("learning rate", lr)
        name = type(self).__name__
        if isinstance(params, _C.Tensor):
            raise TypeError(f"{name}: params should be an iterable of tensors or dicts, but got a tensor; pass "
                            "[tensor] or model.parameters()")
        try:
            params = list(params)
        except TypeError:
            raise TypeError(f"{name}: params should be an iterable of tensors or dicts, but got "
                            f"{type(params).__name__}") from None
        super().__init__(params, lr, name, state_names, True)
        self.defaults = dict(lr=lr, **options)

    def _groups(self):
        """(index, parameter, group's lr, group's weight decay) for every parameter with a gradient."""
        index = 0
        for g in range(self._group_count()):
            lr, weight_decay = self._group_lr(g), self._group_weight_decay(g)
            if weight_decay is None:
                weight_decay = self.defaults.get("weight_decay", 0.0)
            for p in self._group_params(g):
                if p.grad is not None:
                    yield index, p, lr, weight_decay
                index += 1

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with strata.enable_grad():
                loss = closure()
        with strata.no_grad():
            for index, p, lr, weight_decay in self._groups():
                tensors, step = self._state(index)
                self._set_step(index, step + 1)
                self.update(index, p, self._direction(p, p.grad, weight_decay), tensors, step + 1, lr, weight_decay)
        return loss

    def _direction(self, p, grad, weight_decay):
        """The gradient that update() follows: negated with maximize, plus weight_decay * p (L2, as PyTorch's)."""
        if self.defaults.get("maximize"):
            grad = -grad
        return strata.add(grad, p, alpha=weight_decay) if weight_decay != 0 else grad

    def state(self, index):
        """Parameter `index`'s state tensors by name and its step count, as (dict, int)."""
        return self._state(index)
