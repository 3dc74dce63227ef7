"""Datasets as PyTorch's torch.utils.data has them. A dataset backed by a C++ one (a strata._C.data.Dataset) gives the
DataLoader whole batches in one call without the GIL; any other is read an example at a time."""
import bisect
import math

import strata
from strata import _C


class Dataset:
    """A map-style dataset: subclass it and define __getitem__ (and __len__ for samplers that need it)."""

    def _batches_in_cpp(self):
        """The C++ dataset whose batches are exactly what default_collate would make of this one's examples, or
        None. Subclasses answer None unless they are that class itself, as their __getitem__ may differ."""
        return None

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read as a stream: subclass it and define __iter__. DataLoader batches what it yields."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


def batches_in_cpp(dataset):
    """The C++ dataset that gives `dataset`'s batches (see Dataset._batches_in_cpp), or None."""
    if isinstance(dataset, _C.data.Dataset):
        return dataset
    method = getattr(dataset, "_batches_in_cpp", None)
    return method() if method is not None else None


class TensorDataset(Dataset):
    """Examples along the first dimension of tensors of equal length: ds[i] is tuple(t[i] for t in tensors)."""

    def __init__(self, *tensors):
        if not tensors:
            raise strata.InvalidArgumentError("TensorDataset: give at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, strata.Tensor):
                raise strata.DTypeError(f"TensorDataset: argument {i} is a {type(t).__name__}, not a tensor")
            if t.dim() == 0 or t.shape[0] != tensors[0].shape[0]:
                raise strata.ShapeError(f"TensorDataset: size mismatch between tensors: shapes "
                                        f"{[tuple(t.shape) for t in tensors]}")
        self.tensors = tensors
        # Two host tensors (data, target) are gathered a batch at a time in C++ (Note [Gathering batches on the
        # host] in strata/data/dataset.cpp).
        self._cpp = None
        if len(tensors) == 2 and all(t.device.type == "cpu" for t in tensors):
            self._cpp = _C.data.TensorDataset(tensors[0], tensors[1])

    def _batches_in_cpp(self):
        return self._cpp if type(self) is TensorDataset else None

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The examples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]
        self._cpp = None
        inner = batches_in_cpp(dataset)
        if inner is not None:
            self._cpp = _C.data.Subset(inner, self.indices)

    def _batches_in_cpp(self):
        return self._cpp if type(self) is Subset else None

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise strata.InvalidArgumentError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise strata.InvalidArgumentError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise strata.IndexError("absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][index - start]


def randperm_indices(n, generator=None):
    """0..n-1 shuffled by a seed drawn from `generator` (default: the CPU's, so strata.manual_seed decides)."""
    return _C.data.permutation(n, _C.data.draw_seed(generator))


def random_split(dataset, lengths, generator=None):
    """Splits `dataset` into non-overlapping Subsets of the given lengths, or fractions summing to 1."""
    n = len(dataset)
    lengths = list(lengths)
    if lengths and math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if any(not isinstance(x, int) or x < 0 for x in lengths):
        raise strata.InvalidArgumentError(f"random_split: lengths must be non-negative ints or fractions summing "
                                          f"to 1, got {lengths}")
    if sum(lengths) != n:
        raise strata.InvalidArgumentError(f"random_split: sum of input lengths ({sum(lengths)}) does not equal the "
                                          f"length of the input dataset ({n})")
    order = randperm_indices(n, generator)
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, order[start:start + length]))
        start += length
    return out
