"""strata.nn.utils: gradient clipping (torch.nn.utils), in place on the gradients, without reading them back;
parameters as one vector; rnn.pad_sequence."""
import strata
from strata import _C


def _as_list(parameters):
    return [parameters] if isinstance(parameters, _C.Tensor) else list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scales the gradients so that their joint norm is at most max_norm; returns the norm before, as a tensor."""
    return _C.nn.utils.clip_grad_norm_(_as_list(parameters), float(max_norm), float(norm_type))


def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient element into [-clip_value, clip_value]."""
    _C.nn.utils.clip_grad_value_(_as_list(parameters), float(clip_value))


def parameters_to_vector(parameters):
    """The parameters flattened and joined into one vector (a differentiable copy)."""
    return strata.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of `vec` into the parameters, in place."""
    offset = 0
    with strata.no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset:offset + n].reshape(*p.shape))
            offset += n
    if offset != vec.numel():
        raise ValueError(f"vector_to_parameters: the vector has {vec.numel()} values, the parameters {offset}")


from strata.nn.utils import rnn  # noqa: E402,F401
