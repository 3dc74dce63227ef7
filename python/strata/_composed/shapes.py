"""Shapes and construction: unbind, repeat, tile, view_as, ravel, mT, new_*, type(), format specs
on 0-d tensors, uniform_ and normal_."""
import strata
from strata import _C
from strata._composed._registry import Tensor, export


# --- shapes and views
def view_as(self, other):
    return self.view(*other.shape)


def ravel(input):
    return input.reshape(-1)


def unbind(input, dim=0):
    return tuple(input.select(dim, i) for i in range(input.shape[dim]))


def repeat(self, *sizes):
    """Tiles the tensor: each dim i becomes sizes[i] copies (a broadcast then a reshape, differentiable)."""
    sizes = tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else sizes
    if len(sizes) < self.dim():
        raise ValueError(f"repeat: number of dimensions of repeat dims ({len(sizes)}) can not be smaller than number "
                         f"of dimensions of tensor ({self.dim()})")
    shape = (1,) * (len(sizes) - self.dim()) + tuple(self.shape)
    interleaved = []
    for r, s in zip(sizes, shape):
        interleaved += [1, s]
    expanded = []
    for r, s in zip(sizes, shape):
        expanded += [r, s]
    x = self.reshape(*interleaved).expand(*expanded)
    return x.reshape(*[r * s for r, s in zip(sizes, shape)])


def tile(input, dims):
    dims = tuple(dims)
    return repeat(input, *((1,) * (input.dim() - len(dims)) + dims))


for _f in (view_as, ravel, unbind, tile):
    export(_f, function_too=_f not in (view_as,))
export(repeat, function_too=False)
if not hasattr(Tensor, "mT"):
    Tensor.mT = property(lambda self: self.transpose(-2, -1), doc="The last two dims transposed (batched .T).")
    Tensor.mH = Tensor.mT


# --- new tensors like this one, type(), formatting, in-place random fills
def _new(factory):
    def method(self, *size, dtype=None, device=None, requires_grad=False):
        size = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
        return factory(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)
    return method


if not hasattr(Tensor, "new_zeros"):
    Tensor.new_zeros, Tensor.new_ones, Tensor.new_empty = _new(strata.zeros), _new(strata.ones), _new(strata.empty)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return strata.full(tuple(size), fill_value, dtype=dtype or self.dtype, device=device or self.device,
                       requires_grad=requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return strata.tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


export(_new_full, "new_full", function_too=False)
export(_new_tensor, "new_tensor", function_too=False)

_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
               "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor", "uint8": "ByteTensor",
               "bool": "BoolTensor"}


def _type(self, dtype=None, non_blocking=False):
    """No argument: the type's name ("strata.FloatTensor", "strata.cuda.FloatTensor"); a dtype or such a name:
    the tensor converted."""
    if dtype is None:
        name = _TYPE_NAMES[str(self.dtype).split(".")[-1]]
        return f"strata.{'cuda.' if self.is_cuda else ''}{name}"
    if isinstance(dtype, str):
        by_name = {v: k for k, v in _TYPE_NAMES.items()}
        key = dtype.split(".")[-1]
        if key not in by_name:
            raise ValueError(f"type: invalid type {dtype!r}")
        return self.to(getattr(strata, by_name[key]))
    return self.to(dtype)


export(_type, "type", function_too=False)


def _format(self, spec):
    if self.dim() == 0:
        return format(self.item(), spec)
    return object.__format__(self, spec)


if "__format__" not in Tensor.__dict__:
    Tensor.__format__ = _format


def _check_fill(self, op):
    if self.requires_grad and self.is_leaf and strata.is_grad_enabled():
        raise strata.InvalidArgumentError(f"{op}: a leaf tensor that requires grad is being used in an in-place "
                                          "operation; run it under strata.no_grad()")


def _uniform_(self, a=0.0, b=1.0):
    _check_fill(self, "uniform_")
    _C.nn.init.uniform_(self, a, b)
    return self


def _normal_(self, mean=0.0, std=1.0):
    _check_fill(self, "normal_")
    _C.nn.init.normal_(self, mean, std)
    return self


export(_uniform_, "uniform_", function_too=False)
export(_normal_, "normal_", function_too=False)
