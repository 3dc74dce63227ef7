"""What the modules of strata._composed share: attaching a function to Tensor and to the strata namespace, named
result tuples, and the helpers for zero gradients, numbers as tensors and in-place forms."""
import collections
import functools

import strata
from strata import _C

Tensor = _C.Tensor
# name -> function, for strata.<name>; strata/_composed/__init__.py exports them.
exported = {}
_return_types = {}


def named(name, fields):
    """PyTorch's torch.return_types.<name>: a named tuple that prints as strata.return_types.<name>."""
    if name not in _return_types:
        result_type = collections.namedtuple(name, fields)
        result_type.__name__ = result_type.__qualname__ = f"strata.return_types.{name}"
        _return_types[name] = result_type
    return _return_types[name]


def export(function, name=None, method=True, function_too=True):
    """Attaches `function` as Tensor.<name> and strata.<name> where the compiled module has neither, so that a C++
    kernel added later takes over by itself. A function that is also a method takes a tensor first, which
    strata.<name> checks, as PyTorch's do."""
    name = name or function.__name__
    if method and not hasattr(Tensor, name):
        setattr(Tensor, name, function)
    if function_too and not hasattr(_C, name):
        exported[name] = _taking_a_tensor_first(function, name) if method else function
    return function


def _taking_a_tensor_first(function, name):
    @functools.wraps(function)
    def checked(*args, **kwargs):
        first = args[0] if args else kwargs.get("input", kwargs.get("tensor"))
        if not isinstance(first, Tensor):
            raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(first).__name__}")
        return function(*args, **kwargs)

    return checked


def full_like_bool(t, value):
    return strata.full(tuple(t.shape), value, dtype=strata.bool, device=t.device)


def zero_gradient(input, value):
    """`value` as the result of a function of `input` whose derivative is 0 (floor, round...): requires grad when
    input does, as in PyTorch, and passes back zeros (where() never sends gradient to its unselected side)."""
    if not input.requires_grad:
        return value
    return strata.where(full_like_bool(input, True), value, input)


def as_tensor_like(value, like):
    return value if isinstance(value, Tensor) else strata.scalar_tensor(value, device=like.device)


def in_place(self, compute):
    """self.copy_(compute(clone)): compute's backward keeps the values it saved, and copy_ makes the write
    autograd's (PyTorch's rules: refused on a leaf that requires grad outside no_grad)."""
    return self.copy_(compute(self.clone()))
