"""Samplers as PyTorch's: which indices of a dataset an epoch visits, and how they group into batches."""
import strata
from strata import _C


class Sampler:
    """Yields indices of a dataset; subclass it and define __iter__ (and __len__)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new order every epoch from a seed drawn from `generator` (default: the CPU's, which strata.manual_seed
    seeds), as PyTorch's RandomSampler; with replacement, `num_samples` uniform draws."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise strata.DTypeError(f"RandomSampler: replacement should be a bool, got {replacement!r}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise strata.InvalidArgumentError(f"RandomSampler: num_samples should be a positive integer, got "
                                              f"{self.num_samples!r}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            yield from _C.data.uniform_indices(n, self.num_samples, _C.data.draw_seed(self.generator))
            return
        order = []
        for _ in range(self.num_samples // n):
            order += _C.data.permutation(n, _C.data.draw_seed(self.generator))
        order += _C.data.permutation(n, _C.data.draw_seed(self.generator))[:self.num_samples % n]
        yield from order

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a new random order every epoch."""

    def __init__(self, indices, generator=None):
        self.indices = list(indices)
        self.generator = generator

    def __iter__(self):
        for i in _C.data.permutation(len(self.indices), _C.data.draw_seed(self.generator)):
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of `batch_size`."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise strata.InvalidArgumentError(f"BatchSampler: batch_size should be a positive integer, got "
                                              f"{batch_size!r}")
        if not isinstance(drop_last, bool):
            raise strata.DTypeError(f"BatchSampler: drop_last should be a bool, got {drop_last!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
