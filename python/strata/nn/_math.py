"""Functions that Strata has no kernel for, composed from differentiable ops with PyTorch's values and gradients.

Note [Gradients through where]
where(c, a, b) passes no gradient to the branch it does not select, but that branch's own backward still runs, and
0 times an infinity or a NaN met there is NaN. So each branch is computed on inputs that keep it finite (the other
branch's positions replaced by a harmless value), never on the raw input.
"""
import strata


def _where(condition, a, b):
    """where with numbers allowed on either side."""
    if not isinstance(a, strata.Tensor):
        a = strata.full_like(b, a)
    if not isinstance(b, strata.Tensor):
        b = strata.full_like(a, b)
    return strata.where(condition, a, b)


def log1p(input):
    """log(1 + u), exact for small u where log(1 + u) would round 1 + u to 1 (Goldberg's correction)."""
    w = input + 1
    d = w - 1
    tiny = d == 0
    safe_d = _where(tiny, 1.0, d)
    return strata.where(tiny, input, strata.log(_where(tiny, 1.0, w)) * input / safe_d)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above threshold as PyTorch's; exp only ever sees a value <= 0."""
    z = input * beta
    negative = z <= 0
    z_neg = _where(negative, z, 0.0)
    z_pos = _where(negative, 0.0, z)
    smooth = _where(negative, log1p(strata.exp(z_neg)), z_pos + log1p(strata.exp(-z_pos))) / beta
    return strata.where(z > threshold, input, smooth)
