"""Spellings: the in-place forms of the unary ops, and NumPy's axis=, keepdims= and size= that PyTorch accepts.
Imported last, as it wraps what the other modules defined."""
import functools


from strata import _C
from strata._composed._registry import Tensor, exported, in_place


# --- the in-place forms (_registry.in_place)
def _in_place_form(name):
    def method(self, *args, **kwargs):
        return in_place(self, lambda x: getattr(x, name)(*args, **kwargs))

    method.__name__ = f"{name}_"
    method.__doc__ = f"In place: self = self.{name}(...)."
    return method


for _name in ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "sin", "cos", "tan", "erf",
              "floor", "ceil", "round", "trunc", "clamp", "pow", "remainder", "fmod", "floor_divide", "logical_not"):
    if not hasattr(Tensor, f"{_name}_") and hasattr(Tensor, _name):
        setattr(Tensor, f"{_name}_", _in_place_form(_name))
if not hasattr(Tensor, "__imod__"):
    Tensor.__imod__ = _in_place_form("remainder")
    Tensor.__ifloordiv__ = _in_place_form("floor_divide")


# --- NumPy's spellings that PyTorch accepts: axis= for dim= (D2L writes X.sum(axis=0)), size= for the shape
def _with_aliases(function, aliases):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        for alias, name in aliases:
            if alias in kwargs:
                if name in kwargs:
                    raise TypeError(f"{function.__name__}(): got both {alias}= and {name}=")
                kwargs[name] = kwargs.pop(alias)
        return function(*args, **kwargs)

    return wrapper


def _with_size_keyword(function):
    @functools.wraps(function)
    def wrapper(*args, size=None, **kwargs):
        if size is not None:
            if args:
                raise TypeError(f"{function.__name__}(): got the size both as arguments and as size=")
            args = (size,) if isinstance(size, int) else tuple(size)
        return function(*args, **kwargs)

    return wrapper


for _name in ("sum", "mean", "argmax", "argmin", "max", "min", "std", "var", "cumsum", "prod", "any", "all",
              "softmax", "log_softmax", "logsumexp", "squeeze", "unsqueeze", "cat", "stack"):
    if hasattr(Tensor, _name):
        setattr(Tensor, _name, _with_aliases(getattr(Tensor, _name), [("axis", "dim"), ("keepdims", "keepdim")]))
    _function = exported.get(_name) or getattr(_C, _name, None)
    if _function is not None:
        exported[_name] = _with_aliases(_function, [("axis", "dim"), ("keepdims", "keepdim")])
def _with_dtype(function):
    """dtype=: the input converted first, as PyTorch's sum(dtype=...) and mean(dtype=...)."""
    @functools.wraps(function)
    def wrapper(input, *args, dtype=None, **kwargs):
        return function(input if dtype is None else input.to(dtype), *args, **kwargs)

    return wrapper


for _name in ("sum", "mean"):
    setattr(Tensor, _name, _with_dtype(getattr(Tensor, _name)))
    exported[_name] = _with_dtype(exported[_name])
for _name in ("zeros", "ones", "empty", "rand", "randn"):
    exported[_name] = _with_size_keyword(getattr(_C, _name))
del _name, _function
