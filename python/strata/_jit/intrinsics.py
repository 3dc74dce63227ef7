"""What a @strata.jit function calls for CUDA's built-ins, as Numba's cuda module names them: strata.grid,
strata.gridsize, strata.threadIdx.x, ..., strata.syncthreads(), strata.shared.array, strata.local.array and
strata.atomic.add/sub/max/min/exch/compare_and_swap. They exist to be found by the translator; called from Python
they raise, since they mean something only in a kernel."""


class Intrinsic:
    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"strata.{self.name} means something only inside a @strata.jit function")

    def __repr__(self):
        return f"<strata.jit intrinsic {self.name}>"


class Dim3Intrinsic:
    """threadIdx, blockIdx, blockDim, gridDim: read .x, .y and .z in a kernel."""

    def __init__(self, name):
        self.name = name
        self.x, self.y, self.z = (Intrinsic(f"{name}.{c}") for c in "xyz")

    def __repr__(self):
        return f"<strata.jit intrinsic {self.name}>"


class _Namespace:
    def __init__(self, prefix, names):
        for n in names:
            setattr(self, n, Intrinsic(f"{prefix}.{n}"))


grid = Intrinsic("grid")
gridsize = Intrinsic("gridsize")
syncthreads = Intrinsic("syncthreads")
threadIdx = Dim3Intrinsic("threadIdx")  # noqa: N816 (CUDA's and Numba's names)
blockIdx = Dim3Intrinsic("blockIdx")  # noqa: N816
blockDim = Dim3Intrinsic("blockDim")  # noqa: N816
gridDim = Dim3Intrinsic("gridDim")  # noqa: N816
shared = _Namespace("shared", ["array"])
local = _Namespace("local", ["array"])
atomic = _Namespace("atomic", ["add", "sub", "max", "min", "exch", "compare_and_swap"])

DIM3 = {id(d.x): (d.name, "x") for d in (threadIdx, blockIdx, blockDim, gridDim)}
DIM3.update({id(d.y): (d.name, "y") for d in (threadIdx, blockIdx, blockDim, gridDim)})
DIM3.update({id(d.z): (d.name, "z") for d in (threadIdx, blockIdx, blockDim, gridDim)})
