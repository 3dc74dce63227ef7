"""Vector and matrix functions without a kernel: dot, mv, outer, diag, trace, flip, roll, movedim,
swapaxes, broadcast_to, broadcast_tensors, hstack, vstack, repeat_interleave, meshgrid, numel, amax, amin,
count_nonzero, cumprod, logspace."""
import numpy as np

import strata
from strata._composed._registry import export


def dot(input, other):
    if input.dim() != 1 or other.dim() != 1:
        raise strata.ShapeError(f"dot: 1D tensors expected, but got {input.dim()}D and {other.dim()}D tensors")
    if input.shape != other.shape:
        raise strata.ShapeError(f"dot: inconsistent tensor size, expected tensor [{input.shape[0]}] and src "
                                f"[{other.shape[0]}] to have the same number of elements")
    return (input * other).sum()


def mv(input, vec):
    if input.dim() != 2 or vec.dim() != 1:
        raise strata.ShapeError(f"mv: expected a matrix and a vector, got {input.dim()}D and {vec.dim()}D tensors")
    return input.matmul(vec)


def outer(input, vec2):
    return input.reshape(-1, 1) * vec2.reshape(1, -1)


def diag(input, diagonal=0):
    """A 1-D tensor's diagonal matrix, or a matrix's diagonal."""
    if input.dim() == 1:
        n = input.shape[0] + abs(diagonal)
        padded = strata.cat([input, strata.zeros(abs(diagonal), dtype=input.dtype, device=input.device)])
        i = strata.arange(n, device=input.device).unsqueeze(1)
        j = strata.arange(n, device=input.device).unsqueeze(0)
        values = padded.unsqueeze(1).expand(n, n) if diagonal >= 0 else padded.unsqueeze(0).expand(n, n)
        return strata.where(j - i == diagonal, values, strata.zeros_like(values))
    if input.dim() != 2:
        raise strata.ShapeError(f"diag: expected a 1-D or 2-D tensor, got {input.dim()}D")
    rows, cols = input.shape
    first_row, first_col = max(0, -diagonal), max(0, diagonal)
    length = max(0, min(rows - first_row, cols - first_col))
    positions = (np.arange(length) + first_row) * cols + np.arange(length) + first_col
    return input.reshape(-1).index_select(0, strata.tensor(positions.astype(np.int64), device=input.device))


def trace(input):
    if input.dim() != 2:
        raise strata.ShapeError(f"trace: expected a matrix, got {input.dim()}D")
    return diag(input).sum()


def _take(input, dim, positions):
    return input.index_select(dim, strata.tensor(np.asarray(positions, dtype=np.int64), device=input.device))


def flip(input, dims):
    dims = [dims] if isinstance(dims, int) else list(dims)
    for d in dims:
        input = _take(input, d, np.arange(input.shape[d])[::-1].copy())
    return input


def roll(input, shifts, dims=None):
    if dims is None:
        return roll(input.reshape(-1), shifts, 0).reshape(*input.shape)
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts ({len(shifts)}) and dims ({len(dims)}) must have the same length")
    for s, d in zip(shifts, dims):
        n = input.shape[d]
        input = _take(input, d, (np.arange(n) - s) % n) if n else input
    return input


def movedim(input, source, destination):
    source = [source] if isinstance(source, int) else list(source)
    destination = [destination] if isinstance(destination, int) else list(destination)
    n = input.dim()
    source, destination = [s % n for s in source], [d % n for d in destination]
    rest = [d for d in range(n) if d not in source]
    order = [None] * n
    for s, d in zip(source, destination):
        order[d] = s
    it = iter(rest)
    return input.permute(*[o if o is not None else next(it) for o in order])


def swapaxes(input, axis0, axis1):
    return input.transpose(axis0, axis1)


def broadcast_to(input, size):
    return input.expand(*size)


def broadcast_tensors(*tensors):
    shape = np.broadcast_shapes(*[tuple(t.shape) for t in tensors])
    return tuple(t.expand(*shape) for t in tensors)


def hstack(tensors):
    tensors = [t.reshape(1) if t.dim() == 0 else t for t in tensors]
    return strata.cat(tensors, 0 if tensors[0].dim() == 1 else 1)


def vstack(tensors):
    return strata.cat([t.reshape(1, -1) if t.dim() < 2 else t for t in tensors], 0)


def repeat_interleave(input, repeats, dim=None):
    if dim is None:
        input, dim = input.reshape(-1), 0
    counts = repeats.tolist() if isinstance(repeats, strata.Tensor) else repeats
    n = input.shape[dim]
    positions = np.repeat(np.arange(n), counts if isinstance(counts, int) or len(counts) != 1 else counts[0])
    return _take(input, dim, positions)


def meshgrid(*tensors, indexing="ij"):
    tensors = list(tensors[0]) if len(tensors) == 1 and not isinstance(tensors[0], strata.Tensor) else tensors
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    shape = [t.numel() for t in tensors]
    grids = [t.reshape([-1 if i == k else 1 for k in range(len(tensors))]).expand(*shape)
             for i, t in enumerate(tensors)]
    # "xy" is "ij" with the first two dims swapped (NumPy's Cartesian convention).
    return tuple(g.transpose(0, 1) for g in grids) if indexing == "xy" and len(tensors) >= 2 else tuple(grids)


def numel(input):
    return input.numel()


def _extreme(input, dim, keepdim, largest):
    if dim is None:
        out = input.max() if largest else input.min()
        return out.reshape([1] * input.dim()) if keepdim else out
    dims = sorted((d % input.dim() for d in ([dim] if isinstance(dim, int) else dim)), reverse=True)
    for d in dims:
        input = (input.max(d, keepdim=keepdim) if largest else input.min(d, keepdim=keepdim))[0]
    return input


def amax(input, dim=None, keepdim=False):
    return _extreme(input, dim, keepdim, True)


def amin(input, dim=None, keepdim=False):
    return _extreme(input, dim, keepdim, False)


def count_nonzero(input, dim=None):
    nonzero = (input != 0).long()
    return nonzero.sum() if dim is None else nonzero.sum(dim)


def cumprod(input, dim, dtype=None):
    x = input if dtype is None else input.to(dtype)
    d = dim % x.dim()
    parts = [x.narrow(d, 0, 1)]
    for k in range(1, x.shape[d]):
        parts.append(parts[-1] * x.narrow(d, k, 1))
    return strata.cat(parts, d) if parts else x.clone()


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    out = base ** strata.linspace(start, end, steps, dtype=strata.float64, device=device)
    out = out.to(dtype or strata.float32)
    return out.requires_grad_(requires_grad)


for _f in (dot, mv, outer, diag, trace, flip, roll, movedim, swapaxes, broadcast_to, repeat_interleave,
           numel, amax, amin, count_nonzero, cumprod):
    export(_f)
for _f in (broadcast_tensors, meshgrid, logspace, hstack, vstack):
    export(_f, method=False)
export(outer, "ger")
export(swapaxes, "swapdims")
export(movedim, "moveaxis")
export(numel, "nelement", function_too=False)
