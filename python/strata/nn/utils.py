"""strata.nn.utils: gradient clipping (torch.nn.utils), in place on the gradients, without reading them back."""
from strata import _C


def _as_list(parameters):
    return [parameters] if isinstance(parameters, _C.Tensor) else list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scales the gradients so that their joint norm is at most max_norm; returns the norm before, as a tensor."""
    return _C.nn.utils.clip_grad_norm_(_as_list(parameters), float(max_norm), float(norm_type))


def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient element into [-clip_value, clip_value]."""
    _C.nn.utils.clip_grad_value_(_as_list(parameters), float(clip_value))
