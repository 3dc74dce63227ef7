"""The parts of strata's tensor API written in Python: tensor(), grad-mode context managers, tolist()."""
import functools

import numpy as np

from strata import _C

Tensor = _C.Tensor


def _array_of(data):
    # Python floats become float32 and Python ints int64, as in PyTorch; a NumPy array keeps its dtype.
    try:
        array = np.array(data, copy=True, order="C")
    except ValueError as e:
        raise _C.InvalidArgumentError(f"tensor(): nested lists must be regular (every row as long): {e}") from None
    if array.dtype == np.float64 and not isinstance(data, (np.ndarray, np.generic)):
        array = array.astype(np.float32, order="C")
    if array.dtype == object:
        raise _C.TypeError(f"tensor(): could not infer a dtype from {type(data).__name__}: it takes numbers, nested "
                           "lists of them (regular, ints within 64 bits), NumPy arrays and tensors")
    return array


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (a number, nested lists, a NumPy array or a tensor)."""
    if isinstance(data, Tensor):
        t = data.detach().clone()
    else:
        # The fresh array is this tensor's memory: no second copy.
        t = _C.from_numpy(_array_of(data))
    if dtype is not None:
        t = t.to(dtype)
    if device is not None:
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data, dtype=None, device=None):
    """`data` as a tensor, sharing its memory where it can (a NumPy array of a supported dtype, a tensor)."""
    if isinstance(data, Tensor):
        t = data
    elif isinstance(data, np.ndarray):
        t = _C.from_numpy(data)
    else:
        t = tensor(data)
    if dtype is not None:
        t = t.to(dtype)
    if device is not None:
        t = t.to(device)
    return t


class set_grad_enabled:
    """Turns graph recording on or off on this thread; as a context manager, restores the previous mode after."""

    def __init__(self, mode):
        self.previous = _C.is_grad_enabled()
        _C.set_grad_enabled(bool(mode))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self.previous)
        return False


class _GradMode:
    mode = True

    def __enter__(self):
        self.previous = _C.is_grad_enabled()
        _C.set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self.previous)
        return False

    def __call__(self, function):
        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            with type(self)():
                return function(*args, **kwargs)

        return wrapped


class no_grad(_GradMode):
    """`with strata.no_grad():` records no graph inside (inference, manual updates); also a decorator."""

    mode = False


class enable_grad(_GradMode):
    """Records the graph inside, even within no_grad."""

    mode = True


def _tolist(self):
    t = self.detach().cpu()
    if t.dtype == _C.bfloat16:
        t = t.float()
    return t.numpy().tolist()


Tensor.tolist = _tolist
# NumPy's binary operators defer to the tensor's (which refuse arrays) rather than converting the tensor silently.
Tensor.__array_priority__ = 1000


class Size(tuple):
    """A tensor's shape, as torch.Size: a tuple of ints (t.shape, t.size()) that also counts its elements."""

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, index):
        item = super().__getitem__(index)
        return Size(item) if isinstance(index, slice) else item

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))

    def __repr__(self):
        return f"strata.Size({list(self)})"
