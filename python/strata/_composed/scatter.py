"""Scatter and index writes without a kernel, from scatter_add: scatter (and value=), scatter_add_, index_add,
index_fill, fill_diagonal_ and their in-place forms, differentiable where PyTorch's are."""
import numpy as np

import strata
from strata._composed._registry import Tensor, export, in_place


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """input with input[index[i][j]][j] = src[i][j] (dim 0), src a tensor (the part of index's shape is read) or a
    number. Where index lists one position twice, PyTorch keeps one of the values, unspecified which; here their
    sum."""
    if reduce is not None:
        raise NotImplementedError("scatter: reduce= is not implemented; use scatter_add for 'add'")
    if isinstance(src, Tensor):
        for d, n in enumerate(index.shape):
            if src.shape[d] != n:
                src = src.narrow(d, 0, n)
    else:
        fill = value if src is None else src
        if fill is None:
            raise TypeError("scatter: pass src (a tensor or a number) or value=")
        src = strata.full(tuple(index.shape), fill, dtype=input.dtype, device=input.device)
    written = strata.scatter_add(strata.zeros_like(input, dtype=strata.float32), dim, index,
                                 strata.ones(*index.shape, device=input.device)) > 0
    values = strata.scatter_add(strata.zeros_like(input), dim, index, src)
    return strata.where(written, values, input)


def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    return in_place(self, lambda x: scatter(x, dim, index, src, value, reduce=reduce))


def scatter_add_(self, dim, index, src):
    return in_place(self, lambda x: strata.scatter_add(x, dim, index, src))


def _index_along(index, dim, like):
    """index [n] laid along dim of `like` (whose dim has size n) and broadcast to like's shape."""
    shape = [1] * like.dim()
    shape[dim] = index.shape[0]
    return index.reshape(shape).expand(*like.shape)


def index_add(input, dim, index, source, *, alpha=1):
    d = dim % input.dim()
    return strata.scatter_add(input, d, _index_along(index, d, source), source * alpha if alpha != 1 else source)


def index_fill(input, dim, index, value):
    d = dim % input.dim()
    shape = list(input.shape)
    shape[d] = index.shape[0]
    src = strata.full(shape, value, dtype=input.dtype, device=input.device)
    return scatter(input, d, _index_along(index, d, src), src)


def fill_diagonal_(self, fill_value, wrap=False):
    if self.dim() < 2:
        raise strata.ShapeError("fill_diagonal_: dimensions must be larger than 1")
    n = self.shape[0] if wrap and self.dim() == 2 else min(self.shape)
    flat_positions = np.arange(n) * (1 + sum(int(np.prod(self.shape[k + 1:])) for k in range(self.dim() - 1)))
    mask = np.zeros(int(np.prod(self.shape)), dtype=bool)
    mask[flat_positions[flat_positions < mask.size]] = True
    where = strata.from_numpy(mask.reshape(tuple(self.shape))).to(self.device)
    return in_place(self, lambda x: strata.where(where, strata.full_like(x, fill_value), x))


for _f in (scatter, index_add, index_fill):
    export(_f)
for _f in (scatter_, scatter_add_, fill_diagonal_):
    export(_f, function_too=False)
export(lambda self, dim, index, source, *, alpha=1: in_place(self, lambda x: index_add(x, dim, index, source,
                                                                                     alpha=alpha)),
       "index_add_", function_too=False)
export(lambda self, dim, index, value: in_place(self, lambda x: index_fill(x, dim, index, value)), "index_fill_",
       function_too=False)
