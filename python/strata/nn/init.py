"""strata.nn.init (torch.nn.init): fill a tensor in place, without recording autograd, from the default generator
of the tensor's device (strata.manual_seed makes them reproducible). Strata's C++ initialisers (strata/nn/init.h)."""
import strata
from strata._C.nn import init as _init
from strata._C.nn.init import _calculate_fan_in_and_fan_out, calculate_gain  # noqa: F401


def _returning_the_tensor(fill):
    # The C++ function fills the tensor's memory and returns a new handle; PyTorch's return the very tensor.
    def function(tensor, *args, **kwargs):
        fill(tensor, *args, **kwargs)
        return tensor

    function.__name__ = function.__qualname__ = fill.__name__
    function.__doc__ = fill.__doc__
    return function


uniform_ = _returning_the_tensor(_init.uniform_)
normal_ = _returning_the_tensor(_init.normal_)
constant_ = _returning_the_tensor(_init.constant_)
zeros_ = _returning_the_tensor(_init.zeros_)
ones_ = _returning_the_tensor(_init.ones_)
xavier_uniform_ = _returning_the_tensor(_init.xavier_uniform_)
xavier_normal_ = _returning_the_tensor(_init.xavier_normal_)
kaiming_uniform_ = _returning_the_tensor(_init.kaiming_uniform_)
kaiming_normal_ = _returning_the_tensor(_init.kaiming_normal_)


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

