"""strata.amp: mixed precision as torch.amp has it. `autocast(device_type, dtype)` runs the products (matmul,
linear, attention, and convolutions on GPUs) in f16 or bf16 and softmax, norms and losses in f32 (Note [Autocast] in
strata/tensor/autocast.cpp); `GradScaler` scales the loss and skips steps whose gradients overflow (Note [Loss
scaling] in strata/optim/grad_scaler.cpp)."""

import functools

from strata import _C
from strata._C.amp import GradScaler  # noqa: F401

def _device_type(device_type):
    """'cpu', 'cuda' or 'hip' from a device type or a device string ('cuda:0'); the C++ parser refuses others."""
    if not isinstance(device_type, str):
        raise _C.TypeError(f"autocast: device_type must be a str ('cpu', 'cuda' or 'hip'), got "
                           f"{type(device_type).__name__}")
    return device_type.split(":")[0]


class autocast:  # noqa: N801 (PyTorch's name)
    """A context manager (and decorator) that turns autocast on, or off with enabled=False, for one device type on
    this thread: `with strata.autocast("cpu", dtype=strata.bfloat16): loss = model(x)`. dtype defaults to bf16 on the
    CPU and f16 on GPUs. Run backward outside the region, as PyTorch advises; the backward of each op runs in the
    dtype its forward ran in. cache_enabled is accepted for PyTorch's signature (Strata casts a weight at each use)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device_type = _device_type(device_type)
        self.fast_dtype = _C.amp._default_dtype(self.device_type) if dtype is None else dtype
        self.enabled = bool(enabled)
        self._previous = []
        if self.enabled:  # a bad dtype is refused here, not at the first op
            enabled_now, dtype_now = _C.amp._get_autocast(self.device_type)
            _C.amp._set_autocast(self.device_type, True, self.fast_dtype)
            _C.amp._set_autocast(self.device_type, enabled_now, dtype_now)

    def __enter__(self):
        self._previous.append(_C.amp._get_autocast(self.device_type))
        enabled, dtype = self._previous[-1]
        _C.amp._set_autocast(self.device_type, self.enabled, self.fast_dtype if self.enabled else dtype)
        return self

    def __exit__(self, *exc):
        _C.amp._set_autocast(self.device_type, *self._previous.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self.enabled):
                return fn(*args, **kwargs)
        return wrapped


def is_autocast_enabled(device_type="cuda"):
    """Whether autocast is on for device_type on this thread."""
    return _C.amp._get_autocast(_device_type(device_type))[0]


def get_autocast_dtype(device_type):
    """The dtype autocast uses for device_type on this thread."""
    return _C.amp._get_autocast(_device_type(device_type))[1]
