"""strata.inference_mode: PyTorch's faster no_grad for inference. Strata has no separate inference tensors, so it
is no_grad (nothing is recorded), with PyTorch's `mode` argument; as a context manager or a decorator."""
from strata._tensor import _GradMode


class inference_mode(_GradMode):
    def __init__(self, mode=True):
        self.mode = not mode

    def __call__(self, function):
        if not callable(function):
            raise TypeError(f"inference_mode: decorates a function, got {type(function).__name__}")
        return super().__call__(function)


def is_inference_mode_enabled():
    from strata import _C

    return not _C.is_grad_enabled()
