"""strata.jit: kernels written in Python, as Numba's cuda.jit, translated into CUDA-dialect source and compiled by
strata.RawKernel (on the CPU, NVIDIA and AMD GPUs).

    @strata.jit
    def increment_by_one(an_array):
        pos = strata.grid(1)
        if pos < an_array.size:
            an_array[pos] += 1

    increment_by_one[blocks, threads_per_block](an_array)

See translator.py for the supported subset and types.py for the typing rules."""

from strata._jit.decorator import Dispatcher, jit
from strata._jit.intrinsics import (atomic, blockDim, blockIdx, grid, gridDim, gridsize, local, shared, syncthreads,
                                    threadIdx)

__all__ = ["Dispatcher", "jit", "grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "shared", "local",
           "syncthreads", "atomic"]
