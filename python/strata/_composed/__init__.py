"""Tensor methods and functions of PyTorch's that Strata has no kernel for, composed from its differentiable ops
with PyTorch's semantics and gradients. Each is attached to Tensor, and exported as strata.<name>, only where the
compiled module does not define it (_registry.export), so a C++ kernel added later takes over by itself.

Sorting, unique, nonzero and sampling pick positions on the CPU with NumPy (a synchronisation, as in PyTorch, whose
results' sizes depend on the data too); the values they return are gathered from the tensor on its device, so
gradients flow back through them.
"""
from strata._composed import rounding, reductions, selection, shapes, elementwise, linalg, random, scatter  # noqa
from strata._composed import aliases  # noqa: F401  (last: it wraps what the others defined)
from strata._composed._registry import exported

globals().update(exported)
__all__ = sorted(exported)
