"""DataLoader worker processes (num_workers > 0), forked after the parent computed. Each case runs in its own
interpreter with a timeout, so a hang or a crash fails the test, never the suite."""
import subprocess
import sys
import textwrap

_PRELUDE = """
import os
import strata
from strata import nn
from strata.utils.data import DataLoader, Dataset, get_worker_info

class Squares(Dataset):
    def __init__(self, n):
        self.n = n
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        x = strata.full((4, 4), float(i))
        return (x @ x)[0, :1] / 4, i   # a product in the worker too

w = strata.randn(128, 128)
(w @ w).sum().item()                    # the parent's pools are running when the workers fork
nn.Conv2d(1, 2, 3)(strata.randn(1, 1, 8, 8))
"""


def run(body, timeout=120):
    result = subprocess.run([sys.executable, "-c", _PRELUDE + textwrap.dedent(body)], capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_workers_give_the_batches_in_order_after_the_parent_computed():
    assert run("""
        dl = DataLoader(Squares(50), batch_size=4, num_workers=2)
        for epoch in range(2):
            xs, ys = [], []
            for x, y in dl:
                xs += [round(v, 3) for v in x[:, 0].tolist()]
                ys += y.tolist()
            print(ys == list(range(50)) and xs == [float(i * i) for i in range(50)])
    """) == ["True", "True"]


def test_workers_shuffle_like_the_main_process():
    assert run("""
        def order(workers):
            strata.manual_seed(5)
            return [t for _, y in DataLoader(Squares(30), batch_size=4, shuffle=True, num_workers=workers)
                    for t in y.tolist()]
        print(order(0) == order(3) and sorted(order(2)) == list(range(30)))
    """) == ["True"]


def test_worker_info_and_init_fn():
    assert run("""
        def init(worker_id):
            assert get_worker_info().id == worker_id
        class WhoReads(Squares):
            def __getitem__(self, i):
                return get_worker_info().id
        ids = set()
        for b in DataLoader(WhoReads(16), batch_size=2, num_workers=2, worker_init_fn=init):
            ids.update(b.tolist())
        print(sorted(ids), get_worker_info())
    """) == ["[0,", "1]", "None"]


def test_an_error_in_a_worker_reaches_the_loop_with_its_traceback():
    assert run("""
        class Broken(Squares):
            def __getitem__(self, i):
                if i == 9:
                    raise KeyError("example nine")
                return super().__getitem__(i)
        try:
            for _ in DataLoader(Broken(20), batch_size=2, num_workers=2):
                pass
        except strata.Error as e:
            print("KeyError" in str(e) and "example nine" in str(e))
    """) == ["True"]


def test_a_worker_that_dies_is_reported_not_waited_for():
    assert run("""
        class Dies(Squares):
            def __getitem__(self, i):
                if i == 5:
                    os._exit(3)
                return super().__getitem__(i)
        try:
            list(DataLoader(Dies(20), batch_size=2, num_workers=2))
        except strata.Error as e:
            print("exited unexpectedly" in str(e))
    """) == ["True"]


def test_breaking_out_early_stops_the_workers():
    assert run("""
        import multiprocessing as mp
        dl = DataLoader(Squares(1000), batch_size=4, num_workers=2)
        for _ in range(3):
            next(iter(dl))
            for i, _ in enumerate(dl):
                if i == 2:
                    break
        import gc; gc.collect()
        print(len(mp.active_children()))
    """) == ["0"]
