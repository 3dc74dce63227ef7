"""strata.nn.init (torch.nn.init): fill a tensor in place, without recording autograd, from the default generator
of the tensor's device (strata.manual_seed makes them reproducible). Strata's C++ initialisers (strata/nn/init.h)."""
import math

import strata
from strata._C.nn.init import (  # noqa: F401
    _calculate_fan_in_and_fan_out,
    calculate_gain,
    constant_,
    kaiming_normal_,
    kaiming_uniform_,
    normal_,
    ones_,
    uniform_,
    xavier_normal_,
    xavier_uniform_,
    zeros_,
)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Normal(mean, std) restricted to [a, b]: draws again where a value fell outside, until none does. Exact, and
    quick for the usual bounds (about 5 % of draws fall outside +-2 std)."""
    if not std > 0 or not a < b:
        raise ValueError(f"trunc_normal_: needs std > 0 and a < b, got std={std}, a={a}, b={b}")
    if mean < a - 2 * std or mean > b + 2 * std:
        raise ValueError(f"trunc_normal_: mean ({mean}) is more than 2 std from [a, b] = [{a}, {b}]; the "
                         "distribution of values would be far from a truncated normal")
    with strata.no_grad():
        values = strata.randn(*tensor.shape, dtype=tensor.dtype, device=tensor.device) * std + mean
        for _ in range(1000):
            outside = (values < a) | (values > b)
            if not bool(outside.sum() > 0):
                break
            fresh = strata.randn(*tensor.shape, dtype=tensor.dtype, device=tensor.device) * std + mean
            values = strata.where(outside, fresh, values)
        tensor.copy_(values.clamp(a, b))
    return tensor


def eye_(tensor):
    if tensor.dim() != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got {tensor.dim()}")
    with strata.no_grad():
        tensor.copy_(strata.eye(*tensor.shape, dtype=tensor.dtype, device=tensor.device))
    return tensor


def orthogonal_(tensor, gain=1.0):
    raise NotImplementedError("nn.init.orthogonal_ (torch.nn.init.orthogonal_) needs a QR decomposition, which Strata "
                              "does not have; use nn.init.xavier_uniform_ or kaiming_uniform_")


del math
