"""strata.RawKernel: a kernel in CUDA's dialect, compiled while the program runs, on the CPU and on GPUs.

    add = strata.RawKernel(r'''
    extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) c[i] = a[i] + b[i];
    }''', "add")
    add(((n + 255) // 256,), (256,), (a, b, c, n))   # runs where a, b and c are

Called as CuPy's RawKernel: grid, block, a tuple of arguments, and shared_mem for ``extern __shared__`` arrays.
NumPy arrays are used in place (on the CPU). ``cache=False`` keeps the compiled module out of the disk cache."""

import numpy as _np

from strata import _C


class RawKernel(_C.RawKernel):
    __doc__ = __doc__

    def __call__(self, grid, block, args, shared_mem=0):
        if isinstance(args, (tuple, list)):
            params = self.params
            args = tuple(_argument(self.name, params, i, a) for i, a in enumerate(args))
        return super().__call__(grid, block, args, shared_mem)

    def __repr__(self):
        return f"<strata.RawKernel {self.name}({', '.join(f'{t} {n}'.strip() for n, t, _, _ in self.params)})>"


def _argument(name, params, i, a):
    if not isinstance(a, _np.ndarray):
        return a
    writes = i < len(params) and params[i][2] and not params[i][3]
    if writes and not a.flags.writeable:
        raise _C.InvalidArgumentError(
            f"RawKernel '{name}': argument {i} ({params[i][1]} {params[i][0]}) may be written, but the NumPy array is "
            "read-only")
    if not a.flags.c_contiguous:
        raise _C.InvalidArgumentError(
            f"RawKernel '{name}': argument {i}: the NumPy array is not C-contiguous; pass np.ascontiguousarray(a)")
    # Read-only memory read through a const pointer: a copy serves, and from_numpy's warning would say nothing new.
    return _C.from_numpy(a if a.flags.writeable else a.copy())


def compile(code, target, options=()):  # noqa: A001 (the name says what it does)
    """Compiles `code` for `target` ("cpu", "cuda:sm_90", "hip:gfx90a") without launching anything: no device is
    needed. Returns the module's bytes (a shared object, a cubin or PTX, a code object)."""
    binary, _log, _from_cache = _C._jit_compile(code, target, list(options))
    return binary


def cache_stats():
    """Hits, misses and discarded entries of the kernel cache in this process."""
    return _C._jit_cache_stats()


def cache_folder():
    """The kernel cache's folder, or '' when it is off (STRATA_KERNEL_CACHE=off) or unusable."""
    return _C._jit_cache_folder()
