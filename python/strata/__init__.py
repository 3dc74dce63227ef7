"""Strata from Python: tensors on devices, autograd, layers and optimizers, under PyTorch's names.

    import strata
    x = strata.ones(2, 3, device="cuda")     # lives on the GPU when there is one
    y = (x + 1).cpu().numpy()                # an explicit, counted copy; numpy() shares the CPU tensor's memory
"""
# Nothing here writes the process's environment: how long OpenMP's threads spin (GOMP_SPINCOUNT) is the user's to
# set, before Python starts (Note [How long OpenMP spins] in strata/runtime/parallel.cpp; the README's variables).
import numpy as _np

from strata import _C

# Everything the compiled module defines at its top level: Tensor, dtype, device, the dtypes (strata.float32, ...),
# the error classes, the creation and math functions. Its C++ submodules and CUDA queries have Python homes below.
for _name in dir(_C):
    if not _name.startswith("_") and _name not in ("nn", "optim", "data") and not _name.startswith("cuda_"):
        globals()[_name] = getattr(_C, _name)
del _name

from strata._tensor import Size, as_tensor, enable_grad, no_grad, set_grad_enabled, tensor  # noqa: E402
from strata import cuda, data, nn, optim  # noqa: E402
from strata import accelerator, autograd, backends  # noqa: E402
from strata._inference_mode import inference_mode, is_inference_mode_enabled  # noqa: E402
from strata._composed import *  # noqa: E402,F401,F403 (PyTorch's tensor functions composed in Python)
from strata.serialization import load, load_file, load_metadata, save, save_file  # noqa: E402
from strata import kernels  # noqa: E402 (kernels compiled at run time: compile, cache_stats, cache_folder)
from strata.kernels import RawKernel  # noqa: E402
from strata import amp  # noqa: E402
from strata import profiler  # noqa: E402 (torch.profiler's profile() and record_function)
from strata import distributed  # noqa: E402 (torch.distributed's names; mpirun starts the ranks)
from strata.amp import autocast, get_autocast_dtype, is_autocast_enabled  # noqa: E402
# @strata.jit: Python functions compiled through RawKernel, with Numba's cuda names for CUDA's built-ins.
from strata._jit import (atomic, blockDim, blockIdx, grid, gridDim, gridsize, jit, local, shared,  # noqa: E402
                         syncthreads, threadIdx)


def is_tensor(obj):
    return isinstance(obj, Tensor)  # noqa: F821 (defined by the loop above)


__version__ = "0.1.0"
