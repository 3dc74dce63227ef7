"""How a list of examples becomes a batch: PyTorch's default_collate and default_convert."""
import collections.abc

import numpy as np

import strata


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_convert(data):
    """What a loader without batching (batch_size=None) hands out: NumPy arrays become tensors, the rest is kept."""
    if isinstance(data, strata.Tensor):
        return data
    if isinstance(data, np.ndarray) and data.dtype.kind not in "USO":
        return strata.as_tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind not in "USO":
        return strata.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return {k: default_convert(v) for k, v in data.items()}
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data


def default_collate(batch):
    """Stacks examples along a new first dimension, keeping their dtypes and values (PyTorch's default_collate):
    tensors and NumPy arrays stack; Python floats become a float64 tensor, ints int64, bools bool; strings stay a
    list; dicts, named tuples and sequences are collated field by field (tuples and lists give lists)."""
    elem = batch[0]
    if isinstance(elem, strata.Tensor):
        return strata.stack(list(batch), 0)
    if isinstance(elem, np.ndarray) and elem.dtype.kind not in "USO":
        return strata.stack([strata.as_tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic) and elem.dtype.kind not in "USO":
        return strata.as_tensor(np.array(batch))
    if isinstance(elem, bool):
        return strata.tensor(list(batch), dtype=strata.bool)
    if isinstance(elem, int):
        return strata.tensor(list(batch), dtype=strata.int64)
    if isinstance(elem, float):
        return strata.tensor(list(batch), dtype=strata.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise strata.InvalidArgumentError("default_collate: each element in list of batch should be of equal "
                                              "size")
        return [default_collate(samples) for samples in zip(*batch)]
    raise strata.DTypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                            f"found {type(elem).__name__}")
