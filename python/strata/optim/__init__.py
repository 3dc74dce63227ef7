"""strata.optim: SGD, Adam, AdamW (C++), RMSprop and Adagrad (Python, on the same C++ base), and learning-rate
schedulers in strata.optim.lr_scheduler.

params may be tensors or, as in PyTorch, parameter groups: dicts with "params" and their own "lr" or
"weight_decay" (the two options a group may set). optimizer.param_groups is PyTorch's list of dicts; setting a
group's "lr" or "weight_decay" changes the optimizer, as schedulers written for PyTorch expect.
"""
from strata._C.optim import SGD, Adam, AdamW, Optimizer  # noqa: F401
from strata.optim import lr_scheduler  # noqa: F401
from strata.optim.adagrad import Adagrad  # noqa: F401
from strata.optim.rmsprop import RMSprop  # noqa: F401


class ParamGroup(dict):
    """One entry of param_groups: a dict whose "lr" and "weight_decay" write through to the optimizer."""

    def __init__(self, optimizer, index):
        wd = optimizer._group_weight_decay(index)
        super().__init__(params=optimizer._group_params(index), lr=optimizer._group_lr(index))
        if wd is not None:
            super().__setitem__("weight_decay", wd)
        self._optimizer, self._index = optimizer, index

    def __setitem__(self, key, value):
        if key == "lr":
            self._optimizer._set_group_lr(self._index, value)
        elif key == "weight_decay":
            self._optimizer._set_group_weight_decay(self._index, value)
        else:
            raise KeyError(f"a parameter group's {key!r} cannot be changed; only 'lr' and 'weight_decay' can")
        super().__setitem__(key, value)


def _signature(*names_and_defaults):
    """The constructor's signature, which inspect cannot read from a compiled class: nanoGPT asks
    inspect.signature(torch.optim.AdamW).parameters whether a fused form exists."""
    import inspect

    return inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                default=default)
                              for name, default in names_and_defaults])


_REQUIRED = __import__("inspect").Parameter.empty
SGD.__signature__ = _signature(("params", _REQUIRED), ("lr", _REQUIRED), ("momentum", 0.0), ("dampening", 0.0),
                               ("weight_decay", 0.0), ("nesterov", False))
Adam.__signature__ = _signature(("params", _REQUIRED), ("lr", 1e-3), ("betas", (0.9, 0.999)), ("eps", 1e-8),
                                ("weight_decay", 0.0))
AdamW.__signature__ = _signature(("params", _REQUIRED), ("lr", 1e-3), ("betas", (0.9, 0.999)), ("eps", 1e-8),
                                 ("weight_decay", 0.01))


def _param_groups(self):
    return [ParamGroup(self, i) for i in range(self._group_count())]


Optimizer.param_groups = property(_param_groups, doc="PyTorch's list of dicts, one per parameter group.")
