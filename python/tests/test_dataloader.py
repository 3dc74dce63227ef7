"""DataLoader as PyTorch's: independent iterators, threads sharing a loader, dtypes kept, shuffles that follow
strata.manual_seed and generator=, Python datasets, collate_fn, samplers, random_split."""
import collections
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import strata
from strata.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler,
                               SequentialSampler, Subset, TensorDataset, default_collate, random_split)


class Squares(Dataset):
    """A dataset written in Python, as PyTorch's tutorial writes one."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return strata.tensor([float(i), float(i * i)]), i


def cpp_dataset(n=10):
    return TensorDataset(strata.arange(n, dtype=strata.float32).reshape(n, 1), strata.arange(n))


def datasets():
    return [("cpp", cpp_dataset()), ("python", Squares(10))]


def targets(batches):
    return [b[1].tolist() for b in batches]


@pytest.mark.parametrize("name,ds", datasets())
def test_nested_loops_each_run_a_whole_epoch(name, ds):
    dl = DataLoader(ds, batch_size=4)
    outer = inner = 0
    for _ in dl:
        outer += 1
        for _ in dl:
            inner += 1
    assert (outer, inner) == (3, 9)


@pytest.mark.parametrize("name,ds", datasets())
def test_next_iter_inside_the_loop_does_not_shift_the_epoch(name, ds):
    dl = DataLoader(ds, batch_size=4)
    seen = []
    for x, y in dl:
        next(iter(dl))
        seen.append(y.tolist())
    assert seen == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


@pytest.mark.parametrize("name,ds", datasets())
@pytest.mark.parametrize("prefetch", [0, 2])
def test_zip_of_a_loader_with_itself_pairs_the_same_batches(name, ds, prefetch):
    dl = DataLoader(ds, batch_size=3, prefetch=prefetch)
    pairs = [(a[1].tolist(), b[1].tolist()) for a, b in zip(dl, dl)]
    assert pairs == [([0, 1, 2], [0, 1, 2]), ([3, 4, 5], [3, 4, 5]), ([6, 7, 8], [6, 7, 8]), ([9], [9])]


@pytest.mark.parametrize("name,ds", [("cpp", cpp_dataset(300)), ("python", Squares(300))])
@pytest.mark.parametrize("prefetch", [0, 2])
def test_four_threads_sharing_a_loader_each_get_whole_epochs(name, ds, prefetch):
    dl = DataLoader(ds, batch_size=8, shuffle=True, prefetch=prefetch)
    results = [None] * 4

    def run(k):
        epochs = []
        for _ in range(3):
            epochs.append(sorted(t for b in dl for t in b[1].tolist()))
        results[k] = epochs

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert results == [[list(range(300))] * 3] * 4


def test_one_iterator_shared_by_threads_hands_out_each_batch_once():
    dl = DataLoader(cpp_dataset(400), batch_size=4, prefetch=2)
    it = iter(dl)
    got, lock = [], threading.Lock()

    def run():
        for x, y in it:
            with lock:
                got.extend(y.tolist())

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(got) == list(range(400))


@pytest.mark.parametrize("prefetch", [0, 2])
def test_u8_data_keeps_its_dtype_and_values(prefetch):
    data = strata.tensor(np.arange(12, dtype=np.uint8).reshape(6, 2) * 20)
    ds = TensorDataset(data, strata.arange(6))
    assert ds[3][0].dtype == strata.uint8
    x, y = next(iter(DataLoader(ds, batch_size=6, prefetch=prefetch)))
    assert x.dtype == strata.uint8 and x.tolist() == data.tolist()
    x, _ = next(iter(DataLoader(ds, batch_size=6, scale_bytes=True)))
    assert x.dtype == strata.float32 and abs(x[5, 1].item() - 220 / 255) < 1e-7


def test_scale_bytes_is_refused_where_it_would_not_apply():
    with pytest.raises(strata.InvalidArgumentError, match="scale_bytes"):
        DataLoader(Squares(4), scale_bytes=True)


@pytest.mark.parametrize("name,ds", [("cpp", cpp_dataset(50)), ("python", Squares(50))])
def test_shuffle_follows_manual_seed(name, ds):
    def epoch():
        return [t for b in DataLoader(ds, batch_size=50, shuffle=True) for t in b[1].tolist()]

    strata.manual_seed(1)
    a = epoch()
    strata.manual_seed(1)
    assert epoch() == a
    assert sorted(a) == list(range(50)) and a != list(range(50))
    strata.manual_seed(2)
    assert epoch() != a


def test_cpp_and_python_datasets_shuffle_alike():
    strata.manual_seed(3)
    a = [t for b in DataLoader(cpp_dataset(30), batch_size=7, shuffle=True) for t in b[1].tolist()]
    strata.manual_seed(3)
    b = [t for b in DataLoader(Squares(30), batch_size=7, shuffle=True) for t in b[1].tolist()]
    assert a == b


def test_each_epoch_of_a_shuffled_loader_differs():
    dl = DataLoader(cpp_dataset(40), batch_size=40, shuffle=True)
    assert next(iter(dl))[1].tolist() != next(iter(dl))[1].tolist()


def test_generator_argument_decides_the_order():
    def order(seed):
        g = strata.Generator().manual_seed(seed)
        return next(iter(DataLoader(Squares(20), batch_size=20, shuffle=True, generator=g)))[1].tolist()

    assert order(7) == order(7) != order(8)
    g = strata.Generator()
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    state = g.get_state()
    first = order_with(g)
    g.set_state(state)
    assert order_with(g) == first


def order_with(generator):
    return next(iter(DataLoader(Squares(20), batch_size=20, shuffle=True, generator=generator)))[1].tolist()


def test_generators_exist_for_the_cpu_only():
    with pytest.raises(NotImplementedError, match="manual_seed"):
        strata.Generator(device="cuda")


def test_seed_orders_depend_on_seed_and_epoch():
    dl = DataLoader(Squares(20), batch_size=20, shuffle=True, seed=4)
    cpp = DataLoader(cpp_dataset(20), batch_size=20, shuffle=True, seed=4)
    first = next(iter(dl))[1].tolist()
    assert next(iter(cpp))[1].tolist() == first
    dl.set_epoch(0)
    assert next(iter(dl))[1].tolist() == first


def test_python_dataset_tutorial_style():
    class CustomImageDataset(Dataset):
        def __init__(self, n, transform=None, target_transform=None):
            self.labels = [i % 10 for i in range(n)]
            self.transform = transform
            self.target_transform = target_transform

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, idx):
            image = strata.full((1, 28, 28), float(idx))
            label = self.labels[idx]
            if self.transform:
                image = self.transform(image)
            if self.target_transform:
                label = self.target_transform(label)
            return image, label

    ds = CustomImageDataset(130, transform=lambda x: x / 255)
    dl = DataLoader(ds, batch_size=64, shuffle=True)
    assert dl.dataset is ds and len(dl) == 3
    features, labels = next(iter(dl))
    assert features.shape == (64, 1, 28, 28) and features.dtype == strata.float32
    assert labels.shape == (64,) and labels.dtype == strata.int64
    assert sum(b[1].shape[0] for b in dl) == 130


def test_default_collate_follows_pytorch():
    Point = collections.namedtuple("Point", "x y")
    batch = default_collate([{"a": 1, "b": 2.5, "c": "s", "p": Point(1, True)},
                             {"a": 2, "b": 3.5, "c": "t", "p": Point(2, False)}])
    assert batch["a"].dtype == strata.int64 and batch["a"].tolist() == [1, 2]
    assert batch["b"].dtype == strata.float64 and batch["c"] == ["s", "t"]
    assert isinstance(batch["p"], Point) and batch["p"].y.dtype == strata.bool
    arrays = default_collate([np.zeros(3, dtype=np.uint8), np.ones(3, dtype=np.uint8)])
    assert arrays.dtype == strata.uint8 and arrays.shape == (2, 3)
    assert isinstance(default_collate([(1, 2), (3, 4)]), list)
    with pytest.raises(strata.InvalidArgumentError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="found object"):
        default_collate([object()])


def test_collate_fn_batch_size_none_and_drop_last():
    ds = Squares(5)
    dl = DataLoader(ds, batch_size=2, collate_fn=lambda items: [i for _, i in items])
    assert list(dl) == [[0, 1], [2, 3], [4]]
    assert [y for _, y in DataLoader(ds, batch_size=None)] == [0, 1, 2, 3, 4]
    assert len(DataLoader(ds, batch_size=2, drop_last=True)) == 2
    assert len(list(DataLoader(cpp_dataset(5), batch_size=2, drop_last=True))) == 2
    with pytest.raises(ValueError):
        DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError):
        DataLoader(ds, batch_size=0)


def test_samplers():
    ds = Squares(10)
    assert list(SequentialSampler(ds)) == list(range(10))
    assert sorted(RandomSampler(ds)) == list(range(10))
    assert len(list(RandomSampler(ds, replacement=True, num_samples=25))) == 25
    assert list(BatchSampler(SequentialSampler(ds), 4, True)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    dl = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 3, False))
    assert [b[1].tolist() for b in dl] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    dl = DataLoader(ds, sampler=[9, 8, 7], batch_size=2)
    assert [b[1].tolist() for b in dl] == [[9, 8], [7]]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, sampler=[1], shuffle=True)


@pytest.mark.parametrize("name,ds", datasets())
def test_random_split_and_subset(name, ds):
    g = strata.Generator().manual_seed(0)
    a, b = random_split(ds, [0.7, 0.3], generator=g)
    assert (len(a), len(b)) == (7, 3)
    assert sorted(a.indices + b.indices) == list(range(10))
    assert [int(y) for _, y in DataLoader(Subset(ds, [4, 2]), batch_size=None)] == [4, 2]
    again = random_split(ds, [0.7, 0.3], generator=strata.Generator().manual_seed(0))
    assert again[0].indices == a.indices
    loaded = [t for batch in DataLoader(a, batch_size=3) for t in batch[1].tolist()]
    assert loaded == a.indices
    with pytest.raises(ValueError):
        random_split(ds, [3, 3])


def test_concat_and_iterable_datasets():
    both = Squares(3) + Squares(2)
    assert isinstance(both, ConcatDataset) and len(both) == 5 and both[4][1] == 1

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]


def test_worker_options_are_checked_as_pytorch_does():
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(Squares(3), num_workers=-1)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(Squares(3), prefetch_factor=2)
    with pytest.raises(NotImplementedError, match="IterableDataset"):
        DataLoader(IterableDataset(), num_workers=2)


def test_batches_on_a_device():
    dl = DataLoader(Squares(4), batch_size=2, device="cpu")
    assert all(x.device == strata.device("cpu") for x, _ in dl)


def test_an_iterator_started_before_fork_is_refused_in_the_child():
    script = textwrap.dedent("""
        import os
        import strata
        from strata.utils.data import DataLoader, TensorDataset
        dl = DataLoader(TensorDataset(strata.zeros(64, 2), strata.arange(64)), batch_size=4, prefetch=2)
        it = iter(dl)
        next(it)
        pid = os.fork()
        if pid == 0:
            try:
                next(it)
                code = 3
            except strata.InvalidArgumentError as e:
                code = 0 if "fork" in str(e) else 4
            ok = sum(len(y) for _, y in dl) == 64  # a new iteration works
            os._exit(code if ok else 5)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), sum(len(y) for _, y in it))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "60"]
