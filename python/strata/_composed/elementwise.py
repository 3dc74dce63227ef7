"""Elementwise functions without a kernel: sign, square, reciprocal, log1p, expm1, sinh, cosh, log2, log10, exp2,
frac, hypot, logit, lerp, addcmul, addcdiv, isnan, isinf, isfinite, nan_to_num, clip, clamp_min, clamp_max."""
import math

import strata
from strata.nn._math import _where, log1p
from strata._composed._registry import export, zero_gradient
from strata._composed.rounding import trunc


def sign(input):
    with strata.no_grad():
        # sign(nan) is 0, as PyTorch's
        value = strata.where(input > 0, strata.ones_like(input), strata.where(input < 0, -strata.ones_like(input),
                                                                              strata.zeros_like(input)))
    return zero_gradient(input, value)


def square(input):
    return input * input


def reciprocal(input):
    x = input if input.is_floating_point() else input.float()
    return strata.ones_like(x) / x


def expm1(input):
    # exp(x) - 1 loses every digit for small x; its series is exact to float64 there.
    small = input.abs() < 1e-5
    x_small = _where(small, input, 0.0)
    x_large = _where(small, 1.0, input)
    return strata.where(small, x_small + x_small * x_small * 0.5, strata.exp(x_large) - 1)


def sinh(input):
    small = input.abs() < 1e-4
    x_small = _where(small, input, 0.0)
    x_large = _where(small, 1.0, input)
    return strata.where(small, x_small + x_small * x_small * x_small / 6,
                        (strata.exp(x_large) - strata.exp(-x_large)) * 0.5)


def cosh(input):
    return (strata.exp(input) + strata.exp(-input)) * 0.5


def log2(input):
    return strata.log(input) / math.log(2.0)


def log10(input):
    return strata.log(input) / math.log(10.0)


def exp2(input):
    return strata.exp(input * math.log(2.0))


def frac(input):
    return input - trunc(input).detach()


def hypot(input, other):
    return strata.sqrt(input * input + other * other)


def logit(input, eps=None):
    x = input if eps is None else input.clamp(eps, 1 - eps)
    return strata.log(x / (1 - x))


def lerp(input, end, weight):
    return input + (end - input) * weight


def addcmul(input, tensor1, tensor2, *, value=1):
    return input + tensor1 * value * tensor2


def addcdiv(input, tensor1, tensor2, *, value=1):
    return input + tensor1 * value / tensor2


def isnan(input):
    return input != input if input.is_floating_point() else strata.zeros_like(input, dtype=strata.bool)


def isinf(input):
    if not input.is_floating_point():
        return strata.zeros_like(input, dtype=strata.bool)
    return input.abs() == math.inf


def isfinite(input):
    if not input.is_floating_point():
        return strata.ones_like(input, dtype=strata.bool)
    return (input == input) & (input.abs() != math.inf)


_LARGEST = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
            "float64": 1.7976931348623157e308}


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    if not input.is_floating_point():
        return input.clone()
    largest = _LARGEST[str(input.dtype).split(".")[-1]]
    out = _where(input != input, nan, input)
    out = _where(input == math.inf, largest if posinf is None else posinf, out)
    return _where(input == -math.inf, -largest if neginf is None else neginf, out)


def clip(input, min=None, max=None):
    return input.clamp(min, max)


def clamp_min(input, min):
    return input.clamp(min=min)


def clamp_max(input, max):
    return input.clamp(max=max)


for _f in (sign, square, reciprocal, expm1, sinh, cosh, log2, log10, exp2, frac, hypot, logit, lerp, addcmul,
           addcdiv, isnan, isinf, isfinite, nan_to_num, clip, clamp_min, clamp_max):
    export(_f)
export(log1p)
export(sign, "sgn")
export(lambda input, other: input / other, "true_divide")
