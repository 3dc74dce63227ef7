"""Tensor methods and functions of PyTorch's that Strata has no kernel for, composed from its differentiable ops
with PyTorch's semantics and gradients. Each is attached to Tensor (and exported as strata.<name>) only where the
compiled module does not define it, so a C++ kernel added later takes over by itself.

Sorting, unique and nonzero pick positions on the CPU with NumPy (a synchronisation, as in PyTorch, whose results'
sizes depend on the data too); the values they return are gathered from the tensor on its device, so gradients flow
back through them.
"""
import builtins
import collections
import functools
import math

import numpy as np

import strata
from strata import _C

Tensor = _C.Tensor
__all__ = []
_return_types = {}


def _named(name, fields):
    if name not in _return_types:
        result_type = collections.namedtuple(name, fields)
        result_type.__name__ = result_type.__qualname__ = f"strata.return_types.{name}"  # as PyTorch prints them
        _return_types[name] = result_type
    return _return_types[name]


def _export(function, name=None, method=True, function_too=True):
    """Attaches `function` as Tensor.<name> and strata.<name> where the compiled module has neither."""
    name = name or function.__name__
    if method and not hasattr(Tensor, name):
        setattr(Tensor, name, function)
    if function_too and not hasattr(_C, name):
        globals()[name] = function
        __all__.append(name)
    return function


def _full_like_bool(t, value):
    return strata.full(tuple(t.shape), value, dtype=strata.bool, device=t.device)


def _zero_gradient(input, value):
    """`value` as the result of a function of `input` whose derivative is 0 (floor, round...): requires grad when
    input does, as in PyTorch, and passes back zeros (where() never sends gradient to its unselected side)."""
    if not input.requires_grad:
        return value
    return strata.where(_full_like_bool(input, True), value, input)


# --- rounding: floating values are rounded by adding and subtracting 1.5 * 2^(mantissa bits), which rounds half to
# even in the dtype itself (as PyTorch's round); values at or beyond 2^(mantissa bits) are integers already.
def _round_half_even(x):
    if not x.is_floating_point():
        return x.clone()
    work = x if x.dtype in (strata.float32, strata.float64) else x.float()
    bits = 52 if work.dtype == strata.float64 else 23
    magic = 1.5 * 2.0 ** bits
    with strata.no_grad():
        r = strata.where(work.abs() >= 2.0 ** bits, work, (work + magic) - magic)
    return r.to(x.dtype)


def round(input, decimals=0):
    if decimals:
        scale = 10.0 ** decimals
        with strata.no_grad():
            value = _round_half_even(input * scale) / scale
    else:
        value = _round_half_even(input.detach())
    return _zero_gradient(input, value)


def floor(input):
    with strata.no_grad():
        r = _round_half_even(input)
        value = r - (r > input).to(r.dtype) if input.is_floating_point() else r
    return _zero_gradient(input, value)


def ceil(input):
    with strata.no_grad():
        r = _round_half_even(input)
        value = r + (r < input).to(r.dtype) if input.is_floating_point() else r
    return _zero_gradient(input, value)


def trunc(input):
    with strata.no_grad():
        value = strata.where(input >= 0, floor(input), ceil(input)) if input.is_floating_point() else input.clone()
    return _zero_gradient(input, value)


for _f in (round, floor, ceil, trunc):
    _export(_f)
_export(trunc, "fix")


# --- sin and cos: reduced in float64 by the nearest multiple of pi, then an odd Taylor polynomial on [-pi/2, pi/2]
# (its error there is below 1e-15), then cast back: float32 results are PyTorch's to the last bit or one ulp.
_SIN_COEFFICIENTS = [(-1) ** n / math.factorial(2 * n + 1) for n in range(11)]


def _sin_of(x, shift):
    wide = x.double() if x.dtype != strata.float64 else x
    shifted = wide + shift if shift else wide
    with strata.no_grad():
        k = _round_half_even(shifted / math.pi)
        sign = 1 - 2 * (k - floor(k / 2) * 2)
    r = shifted - k * math.pi
    r2 = r * r
    poly = strata.full_like(r2, _SIN_COEFFICIENTS[-1])
    for c in reversed(_SIN_COEFFICIENTS[:-1]):
        poly = poly * r2 + c
    out = r * poly * sign
    return out.to(x.dtype) if x.is_floating_point() else out.float()


def sin(input):
    return _sin_of(input, 0.0)


def cos(input):
    return _sin_of(input, math.pi / 2)


def tan(input):
    return sin(input) / cos(input)


for _f in (sin, cos, tan):
    _export(_f)


# --- remainder and floor division, Python's (and PyTorch's) sign conventions
def _as_tensor_like(value, like):
    return value if isinstance(value, Tensor) else strata.scalar_tensor(value, device=like.device)


def _true_div_for(a, b):
    integral = not a.is_floating_point() and not b.is_floating_point()
    return (a.double() / b.double() if integral else a / b), integral


def floor_divide(input, other):
    a = _as_tensor_like(input, other if isinstance(other, Tensor) else input)
    b = _as_tensor_like(other, a)
    with strata.no_grad():
        q, integral = _true_div_for(a, b)
        q = floor(q)
        return q.long() if integral else q


def remainder(input, other):
    """input - floor(input / other) * other: the sign of the divisor, as Python's %. The gradient is 1 for input and
    -floor(input / other) for other, PyTorch's."""
    a = _as_tensor_like(input, other if isinstance(other, Tensor) else input)
    b = _as_tensor_like(other, a)
    q, integral = _true_div_for(a, b)
    if integral:
        with strata.no_grad():
            return (a.double() - floor(q) * b.double()).long()
    return a - floor(q).detach() * b


def fmod(input, other):
    a = input
    b = _as_tensor_like(other, a)
    q, integral = _true_div_for(a, b)
    if integral:
        with strata.no_grad():
            return (a.double() - trunc(q) * b.double()).long()
    return a - trunc(q).detach() * b


for _f in (floor_divide, remainder, fmod):
    _export(_f)
if not hasattr(Tensor, "__mod__"):
    Tensor.__mod__ = remainder
    Tensor.__rmod__ = lambda self, other: remainder(other, self)
    Tensor.__floordiv__ = floor_divide
    Tensor.__rfloordiv__ = lambda self, other: floor_divide(other, self)


# --- comparisons and reductions
def equal(input, other):
    """True when both have the same shape and the same values (PyTorch's torch.equal)."""
    return tuple(input.shape) == tuple(other.shape) and bool((input.detach() == other.detach()).all())


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = input.detach(), _as_tensor_like(other, input).detach()
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
    _export(_f)


# --- max/min over a dim: named tuples with .values and .indices, as PyTorch's
def _named_extreme(name, original_method, original_function):
    result_type = _named(name, ["values", "indices"])

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
    globals()[_name] = _function
    __all__.append(_name)


# --- sorting and selection
def _sort_keys(x, descending):
    keys = x.detach().cpu()
    keys = keys.float() if keys.dtype in (strata.bfloat16, strata.float16) else keys
    keys = keys.numpy()
    if keys.dtype == np.bool_:
        keys = keys.astype(np.int8)
    if descending:
        # NaN counts as the largest value in both directions, as in PyTorch.
        keys = np.where(np.isnan(keys), -np.inf, -keys.astype(np.float64)) if keys.dtype.kind == "f" else -keys
    return keys


def _positions(array, device):
    return strata.from_numpy(np.ascontiguousarray(array.astype(np.int64))).to(device)


def sort(input, dim=-1, descending=False, stable=False):
    if input.dim() == 0:
        return _named("sort", ["values", "indices"])(input.clone(), strata.zeros_like(input, dtype=strata.int64))
    order = np.argsort(_sort_keys(input, descending), axis=dim, kind="stable")
    indices = _positions(order, input.device)
    return _named("sort", ["values", "indices"])(input.gather(dim % input.dim(), indices), indices)


def argsort(input, dim=-1, descending=False, stable=False):
    return sort(input, dim, descending, stable).indices


def topk(input, k, dim=-1, largest=True, sorted=True):
    d = dim % builtins.max(input.dim(), 1)
    size = input.shape[d] if input.dim() else 1
    if not 0 <= k <= size:
        raise strata.IndexError(f"topk: k ({k}) is out of range for dimension {dim} of size {size}")
    ordered = sort(input, d, descending=largest)
    return _named("topk", ["values", "indices"])(ordered.values.narrow(d, 0, k), ordered.indices.narrow(d, 0, k))


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    if dim is not None:
        raise NotImplementedError("unique: dim= (torch.unique over slices) is not implemented; use dim=None")
    values = input.detach().cpu().numpy()
    uniq, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    out = [strata.from_numpy(np.ascontiguousarray(uniq)).to(input.device)]
    if return_inverse:
        out.append(_positions(inverse.reshape(values.shape), input.device))
    if return_counts:
        out.append(_positions(counts, input.device))
    return out[0] if len(out) == 1 else tuple(out)


def nonzero(input, *, as_tuple=False):
    where_nonzero = np.argwhere(input.detach().cpu().numpy() != 0) if input.dim() else np.zeros((0, 0))
    if as_tuple:
        return tuple(_positions(where_nonzero[:, i], input.device) for i in range(input.dim()))
    return _positions(where_nonzero.reshape(-1, input.dim()), input.device)


def argwhere(input):
    return nonzero(input)


def masked_select(input, mask):
    shape = np.broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    flat = input.expand(*shape).reshape(-1)
    return flat.index_select(0, nonzero(mask.expand(*shape).reshape(-1), as_tuple=True)[0])


def masked_fill(input, mask, value):
    if mask.dtype != strata.bool:
        raise strata.DTypeError(f"masked_fill: the mask must be a bool tensor, got {mask.dtype}")
    fill = value.to(input.dtype) if isinstance(value, Tensor) else strata.full_like(input, value)
    if isinstance(value, Tensor) and value.dim() != 0:
        raise strata.ShapeError(f"masked_fill: only a 0-dimension value tensor is supported, got {value.dim()} dims")
    return strata.where(mask, fill.expand_as(input) if fill.dim() == 0 else fill, input)


def masked_fill_(self, mask, value):
    return _in_place(self, lambda x: masked_fill(x, mask, value))


def where(condition, input=None, other=None):
    """where(condition): nonzero(condition, as_tuple=True); where(condition, x, y) with numbers on either side."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        input = strata.scalar_tensor(input, device=condition.device)
    if not isinstance(input, Tensor):
        input = strata.scalar_tensor(input, dtype=other.dtype, device=other.device)
    if not isinstance(other, Tensor):
        other = strata.scalar_tensor(other, dtype=input.dtype, device=input.device)
    return _C.where(condition, input, other)


for _f in (sort, argsort, topk, unique, nonzero, argwhere, masked_select, masked_fill):
    _export(_f)
_export(masked_fill_, function_too=False)
Tensor.where = lambda self, condition, other: where(condition, self, other)
globals()["where"] = where
__all__.append("where")


# --- shapes and views
def view_as(self, other):
    return self.view(*other.shape)


def ravel(input):
    return input.reshape(-1)


def chunk(input, chunks, dim=0):
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be greater than 0, got {chunks}")
    size = input.shape[dim]
    return split(input, builtins.max(1, -(-size // chunks)), dim)


def split(tensor, split_size_or_sections, dim=0):
    size = tensor.shape[dim]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise ValueError(f"split: split_size must be positive, got {step}")
        sections = [builtins.min(step, size - start) for start in range(0, size, step)] or [0]
    else:
        sections = list(split_size_or_sections)
        if builtins.sum(sections) != size:
            raise ValueError(f"split: split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                             f"size at dimension {dim}), but got split_sizes={sections}")
    out, start = [], 0
    for n in sections:
        out.append(tensor.narrow(dim, start, n))
        start += n
    return tuple(out)


def unbind(input, dim=0):
    return tuple(input.select(dim, i) for i in range(input.shape[dim]))


def repeat(self, *sizes):
    """Tiles the tensor: each dim i becomes sizes[i] copies (a broadcast then a reshape, differentiable)."""
    sizes = tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else sizes
    if len(sizes) < self.dim():
        raise ValueError(f"repeat: number of dimensions of repeat dims ({len(sizes)}) can not be smaller than number "
                         f"of dimensions of tensor ({self.dim()})")
    shape = (1,) * (len(sizes) - self.dim()) + tuple(self.shape)
    interleaved = []
    for r, s in zip(sizes, shape):
        interleaved += [1, s]
    expanded = []
    for r, s in zip(sizes, shape):
        expanded += [r, s]
    x = self.reshape(*interleaved).expand(*expanded)
    return x.reshape(*[r * s for r, s in zip(sizes, shape)])


def tile(input, dims):
    dims = tuple(dims)
    return repeat(input, *((1,) * (input.dim() - len(dims)) + dims))


for _f in (view_as, ravel, chunk, split, unbind, tile):
    _export(_f, function_too=_f not in (view_as,))
_export(repeat, function_too=False)
if not hasattr(Tensor, "mT"):
    Tensor.mT = property(lambda self: self.transpose(-2, -1), doc="The last two dims transposed (batched .T).")
    Tensor.mH = Tensor.mT


# --- new tensors like this one, type(), formatting, in-place random fills
def _new(factory):
    def method(self, *size, dtype=None, device=None, requires_grad=False):
        size = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
        return factory(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)
    return method


if not hasattr(Tensor, "new_zeros"):
    Tensor.new_zeros, Tensor.new_ones, Tensor.new_empty = _new(strata.zeros), _new(strata.ones), _new(strata.empty)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return strata.full(tuple(size), fill_value, dtype=dtype or self.dtype, device=device or self.device,
                       requires_grad=requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return strata.tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


_export(_new_full, "new_full", function_too=False)
_export(_new_tensor, "new_tensor", function_too=False)

_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
               "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor", "uint8": "ByteTensor",
               "bool": "BoolTensor"}


def _type(self, dtype=None, non_blocking=False):
    """No argument: the type's name ("strata.FloatTensor", "strata.cuda.FloatTensor"); a dtype or such a name:
    the tensor converted."""
    if dtype is None:
        name = _TYPE_NAMES[str(self.dtype).split(".")[-1]]
        return f"strata.{'cuda.' if self.is_cuda else ''}{name}"
    if isinstance(dtype, str):
        by_name = {v: k for k, v in _TYPE_NAMES.items()}
        key = dtype.split(".")[-1]
        if key not in by_name:
            raise ValueError(f"type: invalid type {dtype!r}")
        return self.to(getattr(strata, by_name[key]))
    return self.to(dtype)


_export(_type, "type", function_too=False)


def _format(self, spec):
    if self.dim() == 0:
        return format(self.item(), spec)
    return object.__format__(self, spec)


if "__format__" not in Tensor.__dict__:
    Tensor.__format__ = _format


def _check_fill(self, op):
    if self.requires_grad and self.is_leaf and strata.is_grad_enabled():
        raise strata.InvalidArgumentError(f"{op}: a leaf tensor that requires grad is being used in an in-place "
                                          "operation; run it under strata.no_grad()")


def _uniform_(self, a=0.0, b=1.0):
    _check_fill(self, "uniform_")
    _C.nn.init.uniform_(self, a, b)
    return self


def _normal_(self, mean=0.0, std=1.0):
    _check_fill(self, "normal_")
    _C.nn.init.normal_(self, mean, std)
    return self


_export(_uniform_, "uniform_", function_too=False)
_export(_normal_, "normal_", function_too=False)


# --- the in-place forms: self.copy_(f(clone)), so that f's backward keeps the values it saved, and copy_ makes the
# write autograd's (PyTorch's rules: refused on a leaf that requires grad outside no_grad)
def _in_place(self, compute):
    return self.copy_(compute(self.clone()))


def _in_place_form(name):
    def method(self, *args, **kwargs):
        return _in_place(self, lambda x: getattr(x, name)(*args, **kwargs))

    method.__name__ = f"{name}_"
    method.__doc__ = f"In place: self = self.{name}(...)."
    return method


for _name in ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "sin", "cos", "tan", "floor",
              "ceil", "round", "trunc", "clamp", "pow", "remainder", "fmod", "floor_divide", "logical_not"):
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
        setattr(Tensor, _name, _with_aliases(getattr(Tensor, _name), [("axis", "dim")]))
    _function = globals().get(_name) or getattr(_C, _name, None)
    if _function is not None:
        globals()[_name] = _with_aliases(_function, [("axis", "dim")])
        if _name not in __all__:
            __all__.append(_name)
for _name in ("zeros", "ones", "empty", "rand", "randn"):
    globals()[_name] = _with_size_keyword(getattr(_C, _name))
    __all__.append(_name)
del _f, _name, _method, _function
