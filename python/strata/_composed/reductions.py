"""Comparisons and reductions: equal, allclose, any, all, std, cumsum, prod, and max/min over a dim as named
tuples."""
import builtins


import strata
from strata import _C
from strata._composed._registry import Tensor, as_tensor_like, export, exported, named


# --- comparisons and reductions
def equal(input, other):
    """True when both have the same shape and the same values (PyTorch's torch.equal)."""
    return tuple(input.shape) == tuple(other.shape) and bool((input.detach() == other.detach()).all())


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = input.detach(), as_tensor_like(other, input).detach()
    if a.dtype != b.dtype and a.is_floating_point() != b.is_floating_point():
        raise strata.DTypeError(f"isclose: {a.dtype} and {b.dtype} must be the same kind of dtype")
    a, b = (a.double(), b.double())
    close = (a - b).abs() <= atol + rtol * b.abs()
    close = close | (a == b)  # equal infinities
    if equal_nan:
        close = close | ((a != a) & (b != b))
    return close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def any(input, dim=None, keepdim=False):
    nonzero_ = (input.detach() != 0).long()
    return nonzero_.sum(dim, keepdim) > 0 if dim is not None else nonzero_.sum() > 0


def all(input, dim=None, keepdim=False):
    zero = (input.detach() == 0).long()
    return zero.sum(dim, keepdim) == 0 if dim is not None else zero.sum() == 0


def std(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    if isinstance(dim, bool):  # std(unbiased), PyTorch's positional form
        dim, unbiased = None, dim
    correction = (1 if unbiased else 0) if correction is None else correction
    if correction not in (0, 1):
        raise NotImplementedError(f"std: correction={correction} is not implemented; use 0 or 1")
    return input.var(dim, bool(correction), keepdim).sqrt()


def _move_last(input, dim):
    return input if dim in (-1, input.dim() - 1) else input.transpose(dim, -1)


def cumsum(input, dim, dtype=None):
    """A product with an upper-triangular matrix of ones along dim: differentiable, O(n^2) along dim."""
    x = input if dtype is None else input.to(dtype)
    integral = not x.is_floating_point()
    work = x.double() if integral else x
    if work.dim() == 0:
        return x.clone()
    d = dim % work.dim()
    n = work.shape[d]
    ones = strata.ones(n, n, dtype=work.dtype, device=work.device)
    upper = strata.where(strata.arange(n, device=work.device).unsqueeze(1) <= strata.arange(n, device=work.device),
                         ones, strata.zeros_like(ones))
    out = _move_last(_move_last(work, d).matmul(upper), d)
    return out.long() if integral else out


def prod(input, dim=None, keepdim=False, dtype=None):
    """Pairwise products along dim (log2(n) multiplications, each differentiable)."""
    x = input if dtype is None else input.to(dtype)
    if x.dtype == strata.bool:
        x = x.long()
    if dim is None:
        out = prod(x.reshape(-1), 0)
        return out.reshape([1] * x.dim()) if keepdim else out
    d = dim % builtins.max(x.dim(), 1)
    while x.shape[d] > 1:
        n = x.shape[d]
        half = n // 2
        paired = x.narrow(d, 0, half) * x.narrow(d, half, half)
        x = strata.cat([paired, x.narrow(d, n - 1, 1)], d) if n % 2 else paired
    if x.shape[d] == 0:
        shape = list(x.shape)
        shape[d] = 1
        x = strata.ones(*shape, dtype=x.dtype, device=x.device)
    return x if keepdim else x.squeeze(d)


for _f in (equal, isclose, allclose, any, all, std, cumsum, prod):
    export(_f)


# --- max/min over a dim: named tuples with .values and .indices, as PyTorch's
def _named_extreme(name, original_method, original_function):
    result_type = named(name, ["values", "indices"])

    def wrap(result):
        return result_type(*result) if isinstance(result, tuple) and not hasattr(result, "values") else result

    def method(self, *args, **kwargs):
        return wrap(original_method(self, *args, **kwargs))

    def function(*args, **kwargs):
        return wrap(original_function(*args, **kwargs))

    method.__doc__ = function.__doc__ = original_function.__doc__
    return method, function


for _name in ("max", "min"):
    _method, _function = _named_extreme(_name, getattr(Tensor, _name), getattr(_C, _name))
    setattr(Tensor, _name, _method)
    exported[_name] = _function
