"""Sorting and selection: sort, argsort, unique, nonzero, masked_select, and where with one argument or numbers
(topk and masked_fill are kernels)."""
import numpy as np

import strata
from strata import _C
from strata._composed._registry import Tensor, export, exported, named


# --- sorting and selection
def _sort_keys(x, descending):
    keys = x.detach().cpu()
    keys = keys.float() if keys.dtype in (strata.bfloat16, strata.float16) else keys
    keys = keys.numpy()
    if keys.dtype == np.bool_:
        keys = keys.astype(np.int8)
    if descending:
        # NaN counts as the largest value in both directions, as in PyTorch.
        keys = np.where(np.isnan(keys), -np.inf, -keys.astype(np.float64)) if keys.dtype.kind == "f" else -keys
    return keys


def _positions(array, device):
    return strata.from_numpy(np.ascontiguousarray(array.astype(np.int64))).to(device)


def sort(input, dim=-1, descending=False, stable=False):
    if input.dim() == 0:
        return named("sort", ["values", "indices"])(input.clone(), strata.zeros_like(input, dtype=strata.int64))
    order = np.argsort(_sort_keys(input, descending), axis=dim, kind="stable")
    indices = _positions(order, input.device)
    return named("sort", ["values", "indices"])(input.gather(dim % input.dim(), indices), indices)


def argsort(input, dim=-1, descending=False, stable=False):
    return sort(input, dim, descending, stable).indices


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    if dim is not None:
        raise NotImplementedError("unique: dim= (torch.unique over slices) is not implemented; use dim=None")
    values = input.detach().cpu().numpy()
    uniq, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    out = [strata.from_numpy(np.ascontiguousarray(uniq)).to(input.device)]
    if return_inverse:
        out.append(_positions(inverse.reshape(values.shape), input.device))
    if return_counts:
        out.append(_positions(counts, input.device))
    return out[0] if len(out) == 1 else tuple(out)


def nonzero(input, *, as_tuple=False):
    where_nonzero = np.argwhere(input.detach().cpu().numpy() != 0) if input.dim() else np.zeros((0, 0))
    if as_tuple:
        return tuple(_positions(where_nonzero[:, i], input.device) for i in range(input.dim()))
    return _positions(where_nonzero.reshape(-1, input.dim()), input.device)


def argwhere(input):
    return nonzero(input)


def masked_select(input, mask):
    shape = np.broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    flat = input.expand(*shape).reshape(-1)
    return flat.index_select(0, nonzero(mask.expand(*shape).reshape(-1), as_tuple=True)[0])


def where(condition, input=None, other=None):
    """where(condition): nonzero(condition, as_tuple=True); where(condition, x, y) with numbers on either side."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        input = strata.scalar_tensor(input, device=condition.device)
    if not isinstance(input, Tensor):
        input = strata.scalar_tensor(input, dtype=other.dtype, device=other.device)
    if not isinstance(other, Tensor):
        other = strata.scalar_tensor(other, dtype=input.dtype, device=input.device)
    return _C.where(condition, input, other)


for _f in (sort, argsort, unique, nonzero, argwhere, masked_select):
    export(_f)
Tensor.where = lambda self, condition, other: where(condition, self, other)
exported["where"] = where
