"""Random functions without a kernel, drawn from Strata's generators (so strata.manual_seed makes them
reproducible): normal with tensor or number arguments, randperm, bernoulli, bernoulli_, exponential_."""
import numpy as np

import strata
from strata._composed._registry import Tensor, export


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    if generator is not None:
        raise NotImplementedError("normal: generator= is not implemented; seed with strata.manual_seed")
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        like = mean if isinstance(mean, Tensor) else std
        shape = np.broadcast_shapes(tuple(getattr(mean, "shape", ())), tuple(getattr(std, "shape", ())))
        return strata.randn(*shape, dtype=like.dtype, device=like.device) * std + mean
    if size is None:
        raise TypeError("normal: with a number mean and std, size= is required")
    out = strata.randn(*((size,) if isinstance(size, int) else size), dtype=dtype, device=device) * std + mean
    return out.requires_grad_(requires_grad)


def randperm(n, *, dtype=None, device=None, generator=None, requires_grad=False):
    if generator is not None:
        raise NotImplementedError("randperm: generator= is not implemented; seed with strata.manual_seed")
    keys = strata.rand(n).numpy()
    order = np.argsort(keys, kind="stable").astype(np.int64)
    return strata.from_numpy(order).to(device or "cpu").to(dtype or strata.int64)


def bernoulli(input, p=None, *, generator=None):
    probability = input if p is None else strata.full_like(input, p)
    return (strata.rand_like(probability, dtype=strata.float32) < probability).to(input.dtype)


def bernoulli_(self, p=0.5):
    with strata.no_grad():
        return self.copy_(bernoulli(self, p))


def exponential_(self, lambd=1.0):
    with strata.no_grad():
        return self.copy_(-strata.log(1 - strata.rand_like(self)) / lambd)


export(normal, method=False)
export(randperm, method=False)
export(bernoulli)
export(bernoulli_, function_too=False)
export(exponential_, function_too=False)
