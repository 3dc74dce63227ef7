"""Rounding (round, floor, ceil, trunc), tan, and remainder and floor division with Python's signs."""
import strata
from strata import _C
from strata._composed._registry import Tensor, as_tensor_like, export, zero_gradient


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
    return zero_gradient(input, value)


def floor(input):
    with strata.no_grad():
        r = _round_half_even(input)
        value = r - (r > input).to(r.dtype) if input.is_floating_point() else r
    return zero_gradient(input, value)


def ceil(input):
    with strata.no_grad():
        r = _round_half_even(input)
        value = r + (r < input).to(r.dtype) if input.is_floating_point() else r
    return zero_gradient(input, value)


def trunc(input):
    with strata.no_grad():
        value = strata.where(input >= 0, floor(input), ceil(input)) if input.is_floating_point() else input.clone()
    return zero_gradient(input, value)


for _f in (round, floor, ceil, trunc):
    export(_f)
export(trunc, "fix")


# --- tan from the sin and cos kernels
def tan(input):
    return _C.sin(input) / _C.cos(input)


export(tan)


# --- remainder and floor division, Python's (and PyTorch's) sign conventions
def _true_div_for(a, b):
    integral = not a.is_floating_point() and not b.is_floating_point()
    return (a.double() / b.double() if integral else a / b), integral


def floor_divide(input, other):
    a = as_tensor_like(input, other if isinstance(other, Tensor) else input)
    b = as_tensor_like(other, a)
    with strata.no_grad():
        q, integral = _true_div_for(a, b)
        q = floor(q)
        return q.long() if integral else q


def remainder(input, other):
    """input - floor(input / other) * other: the sign of the divisor, as Python's %. The gradient is 1 for input and
    -floor(input / other) for other, PyTorch's."""
    a = as_tensor_like(input, other if isinstance(other, Tensor) else input)
    b = as_tensor_like(other, a)
    q, integral = _true_div_for(a, b)
    if integral:
        with strata.no_grad():
            return (a.double() - floor(q) * b.double()).long()
    return a - floor(q).detach() * b


def fmod(input, other):
    a = input
    b = as_tensor_like(other, a)
    q, integral = _true_div_for(a, b)
    if integral:
        with strata.no_grad():
            return (a.double() - trunc(q) * b.double()).long()
    return a - trunc(q).detach() * b


for _f in (floor_divide, remainder, fmod):
    export(_f)
if not hasattr(Tensor, "__mod__"):
    Tensor.__mod__ = remainder
    Tensor.__rmod__ = lambda self, other: remainder(other, self)
    Tensor.__floordiv__ = floor_divide
    Tensor.__rfloordiv__ = lambda self, other: floor_divide(other, self)
