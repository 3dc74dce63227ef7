"""DataLoader, as PyTorch's: every iter() is an iteration of its own (nested loops, zip(dl, dl), several threads),
and the loader itself is never changed by iterating, so threads may share it."""
import threading

import strata
from strata import _C
from strata.utils.data.collate import default_collate, default_convert
from strata.utils.data.dataset import IterableDataset, batches_in_cpp
from strata.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from strata.utils.data.worker import WorkerBatches


class _SeededSampler(Sampler):
    """Strata's seed=: epoch k's order depends on (seed, k) only, as strata-train's (set_epoch picks k)."""

    def __init__(self, data_source, seed):
        self.data_source = data_source
        self.seed = seed
        self.epoch = 0
        self._lock = threading.Lock()

    def next_epoch(self):
        with self._lock:
            epoch, self.epoch = self.epoch, self.epoch + 1
        return epoch

    def __iter__(self):
        return iter(_C.data.permutation(len(self.data_source), self.seed, self.next_epoch()))

    def __len__(self):
        return len(self.data_source)


def _map_tensors(batch, fn):
    """`batch` with fn applied to each tensor in it, through dicts, lists, tuples and named tuples."""
    if isinstance(batch, strata.Tensor):
        return fn(batch)
    if isinstance(batch, dict):
        return {k: _map_tensors(v, fn) for k, v in batch.items()}
    if isinstance(batch, list):
        return [_map_tensors(v, fn) for v in batch]
    if isinstance(batch, tuple):
        mapped = [_map_tensors(v, fn) for v in batch]
        return type(batch)(*mapped) if hasattr(batch, "_fields") else tuple(mapped)
    return batch


class DataLoader:
    """Batches of a dataset (PyTorch's DataLoader). Beyond PyTorch's arguments, Strata's: `device` (where batches
    are delivered), `non_blocking`, `prefetch` (batches of Strata's datasets prepared ahead on a thread without
    the GIL), `seed` (the shuffled order depends on (seed, epoch) only; `set_epoch` picks the epoch) and
    `scale_bytes` (u8 data of Strata's datasets becomes f32 in [0, 1], as torchvision's ToTensor). Worker
    processes (num_workers) read Python datasets; Strata's own datasets gather whole batches in C++ without the GIL
    and need none, so they ignore num_workers."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", device=None, non_blocking=True, prefetch=0, seed=None, scale_bytes=False):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise strata.InvalidArgumentError(f"DataLoader: num_workers option should be a non-negative integer, "
                                              f"got {num_workers!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise strata.InvalidArgumentError("DataLoader: prefetch_factor option could only be specified in "
                                              "multiprocessing. let num_workers > 0 to enable multiprocessing")
        if num_workers == 0 and persistent_workers:
            raise strata.InvalidArgumentError("DataLoader: persistent_workers option needs num_workers > 0")
        if num_workers > 0 and isinstance(dataset, IterableDataset):
            raise NotImplementedError("DataLoader: worker processes (num_workers > 0) for an IterableDataset are not "
                                      "implemented; use num_workers=0")
        if prefetch_factor is not None and (not isinstance(prefetch_factor, int) or prefetch_factor <= 0):
            raise strata.InvalidArgumentError(f"DataLoader: prefetch_factor should be a positive integer, got "
                                              f"{prefetch_factor!r}")
        if timeout < 0:
            raise strata.InvalidArgumentError("DataLoader: timeout option should be non-negative")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size <= 0):
            raise strata.InvalidArgumentError(f"DataLoader: batch_size should be a positive integer or None, got "
                                              f"{batch_size!r}")
        iterable = isinstance(dataset, IterableDataset)
        if iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise strata.InvalidArgumentError("DataLoader with IterableDataset: expected unspecified shuffle, "
                                              "sampler and batch_sampler options")
        if sampler is not None and shuffle:
            raise strata.InvalidArgumentError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise strata.InvalidArgumentError("DataLoader: batch_sampler option is mutually exclusive with "
                                                  "batch_size, shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None and drop_last:
            raise strata.InvalidArgumentError("DataLoader: batch_size=None option disables auto-batching and is "
                                              "mutually exclusive with drop_last")
        if seed is not None and (sampler is not None or batch_sampler is not None or generator is not None):
            raise strata.InvalidArgumentError("DataLoader: seed= orders the epochs itself; it cannot be given with "
                                              "a sampler, batch_sampler or generator")

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.num_workers = num_workers
        self.prefetch_factor = 2 if num_workers > 0 and prefetch_factor is None else prefetch_factor
        # Workers start again for every iteration: a dataset's state in them does not persist.
        self.persistent_workers = persistent_workers
        self.multiprocessing_context = multiprocessing_context
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.device = None if device is None else strata.device(device)
        self.non_blocking = non_blocking
        self.prefetch = prefetch
        self.seed = seed
        self.scale_bytes = scale_bytes
        self._collate_given = collate_fn is not None
        if collate_fn is None:
            collate_fn = default_convert if batch_size is None and batch_sampler is None else default_collate
        self.collate_fn = collate_fn

        default_sampler = sampler is None and batch_sampler is None
        if iterable:
            sampler = None
        elif sampler is None:
            if shuffle:
                sampler = (_SeededSampler(dataset, seed) if seed is not None
                           else RandomSampler(dataset, generator=generator))
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler

        # Whole batches from C++ (Note [Gathering batches on the host]) when what it gives is what Python would.
        cpp = batches_in_cpp(dataset)
        self._cpp_dataset = cpp if (cpp is not None and default_sampler and not self._collate_given
                                    and batch_size is not None) else None
        if scale_bytes and self._cpp_dataset is None:
            raise strata.InvalidArgumentError(
                "DataLoader: scale_bytes applies to Strata's datasets (TensorDataset of two CPU tensors, "
                "FashionMNIST, Subset of them) with the default sampler and collate_fn; convert in your dataset's "
                "__getitem__, a transform or your collate_fn instead")
        self._cpp_loader = None
        if self._cpp_dataset is not None and (not shuffle or seed is not None):
            # One loader for every iteration: its epochs are (seed, epoch) orders, or in order.
            self._cpp_loader = self._make_cpp_loader(bool(shuffle), seed or 0)

    def _make_cpp_loader(self, shuffle, seed):
        return _C.data.DataLoader(self._cpp_dataset, batch_size=self.batch_size, shuffle=shuffle, seed=seed,
                                  drop_last=self.drop_last, prefetch=self.prefetch, pin_memory=self.pin_memory,
                                  device=self.device, non_blocking=self.non_blocking, scale_bytes=self.scale_bytes)

    def set_epoch(self, epoch):
        """Strata's: the next iteration is epoch `epoch` of a seed= order (then epoch+1, ...)."""
        if self.seed is None:
            raise strata.InvalidArgumentError("DataLoader.set_epoch: only a loader given seed= has numbered "
                                              "epochs; a generator= or strata.manual_seed decides the others")
        if self._cpp_loader is not None:
            self._cpp_loader.set_epoch(epoch)
        if isinstance(self.sampler, _SeededSampler):
            with self.sampler._lock:
                self.sampler.epoch = epoch

    def __len__(self):
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        if self.sampler is not None:
            return len(self.sampler)
        length = len(self.dataset)  # an IterableDataset that knows its length
        if self.batch_size is None:
            return length
        return length // self.batch_size if self.drop_last else -(-length // self.batch_size)

    def __iter__(self):
        # As PyTorch's iterators, every iteration draws a base seed first (its workers' seeds), with workers or
        # without, so that a shuffle is the same for any num_workers and for Strata's datasets and Python's.
        base_seed = _C.data.draw_seed(self.generator) >> 1
        if self._cpp_dataset is not None:
            loader = self._cpp_loader
            if loader is None:  # shuffled: this iteration's order from a seed drawn now, as RandomSampler's
                loader = self._make_cpp_loader(True, _C.data.draw_seed(self.generator))
            return _Iterator(iter(loader), list)
        return _Iterator(self._python_batches(base_seed), None)

    def _python_batches(self, base_seed):
        dataset, collate = self.dataset, self.collate_fn
        if self.num_workers > 0:
            tasks = self.batch_sampler if self.batch_sampler is not None else self.sampler
            batches = WorkerBatches(self, tasks, base_seed)
        elif isinstance(dataset, IterableDataset):
            batches = self._iterable_batches()
        elif self.batch_sampler is not None and hasattr(dataset, "__getitems__"):
            batches = (collate(dataset.__getitems__(indices)) for indices in self.batch_sampler)
        elif self.batch_sampler is not None:
            batches = (collate([dataset[i] for i in indices]) for indices in self.batch_sampler)
        else:
            batches = (collate(dataset[i]) for i in self.sampler)
        for batch in batches:
            if self.pin_memory and strata.cuda.is_available():
                batch = _map_tensors(batch, lambda t: t.pin_memory())
            if self.device is not None:
                batch = _map_tensors(batch, lambda t: t.to(self.device, non_blocking=self.non_blocking))
            yield batch

    def _iterable_batches(self):
        if self.batch_size is None:
            for example in self.dataset:
                yield self.collate_fn(example)
            return
        batch = []
        for example in self.dataset:
            batch.append(example)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)


class _Iterator:
    """One iteration. Threads that share it take its batches one at a time, each batch once."""

    def __init__(self, batches, convert):
        self._batches = batches
        self._convert = convert
        self._lock = threading.Lock()

    def __iter__(self):
        return self

    def __next__(self):
        with self._lock:
            batch = next(self._batches)
        return batch if self._convert is None else self._convert(batch)
