"""strata.distributed, strata.nn.parallel.DistributedDataParallel and DistributedSampler: in this process (a world of
one), and under `mpirun -np 2`, which runs this file's worker() on two ranks, and the data-parallel tutorial against
one process."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import strata
import strata.distributed as dist
from strata import nn
from strata.nn.parallel import DistributedDataParallel as DDP

HERE = pathlib.Path(__file__).resolve()
TUTORIAL = HERE.parent.parent / "tutorials" / "train_data_parallel.py"
MPIRUN = shutil.which("mpirun")


@pytest.fixture
def world():
    dist.init_process_group()
    yield
    dist.destroy_process_group()


def test_pytorchs_names_are_there():
    for name in ("init_process_group", "destroy_process_group", "is_initialized", "get_rank", "get_world_size",
                 "all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor", "all_gather", "barrier",
                 "ReduceOp"):
        assert hasattr(dist, name), name
    assert {"SUM", "AVG", "MIN", "MAX"} <= set(dir(dist.ReduceOp))
    assert strata.nn.parallel.DistributedDataParallel is DDP
    assert strata.data.DistributedSampler is strata.utils.data.distributed.DistributedSampler
    assert strata.utils.data.DistributedSampler is strata.utils.data.distributed.DistributedSampler


def test_what_needs_the_group_says_so_before_init_and_init_refuses_what_strata_lacks():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="has not been initialized"):
        dist.all_reduce(strata.ones(2))
    with pytest.raises(ValueError, match="has not been initialized"):
        DDP(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="backend 'gloo' is not Strata's: its transport between processes is MPI"):
        dist.init_process_group("gloo")
    with pytest.raises(NotImplementedError, match="no rendezvous"):
        dist.init_process_group(init_method="tcp://10.0.0.1:23456")
    with pytest.raises(ValueError, match="world_size=4, but the launcher started 1"):
        dist.init_process_group(world_size=4)
    assert not dist.is_initialized()


def test_a_world_of_one(world):
    assert dist.is_initialized()
    assert (dist.get_rank(), dist.get_world_size()) == (0, 1)
    with pytest.raises(ValueError, match="twice"):
        dist.init_process_group()
    t = strata.tensor([1.0, 2.0])
    assert dist.all_reduce(t, op=dist.ReduceOp.AVG) is None
    work = dist.all_reduce(t, async_op=True)
    assert work.is_completed() and work.wait()
    assert t.tolist() == [1.0, 2.0]
    out = strata.zeros(2)
    dist.all_gather_into_tensor(out, t)
    assert out.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="world_size \\(1\\) times"):
        dist.all_gather_into_tensor(strata.zeros(3), t)
    dist.barrier()
    dist.destroy_process_group()
    assert not dist.is_initialized()
    dist.init_process_group()  # the same world again


def test_distributed_sampler_shards_like_strata_trains():
    ds = list(range(10))
    shards = [list(strata.utils.data.DistributedSampler(ds, num_replicas=3, rank=r, seed=4)) for r in range(3)]
    assert all(len(s) == 4 for s in shards)  # padded to 12
    flat = sorted(i for s in shards for i in s)
    assert set(flat) == set(range(10)) and len(flat) == 12
    sampler = strata.utils.data.DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False, drop_last=True)
    assert list(sampler) == [1, 3, 5, 7, 9] and len(sampler) == 5
    shuffled = strata.utils.data.DistributedSampler(ds, num_replicas=1, rank=0)
    first = list(shuffled)
    shuffled.set_epoch(1)
    assert list(shuffled) != first and sorted(shuffled) == list(range(10))
    with pytest.raises(ValueError, match="Invalid rank 2"):
        strata.utils.data.DistributedSampler(ds, num_replicas=2, rank=2)


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.a = nn.Linear(8, 3)
        self.b = nn.Linear(8, 3)
        self.use_b = False

    def forward(self, x):
        h = self.body(x).relu()
        return self.b(h) if self.use_b else self.a(h)


def test_ddp_in_a_world_of_one_runs_the_module_and_leaves_unused_parameters_alone(world):
    strata.manual_seed(0)
    model = TwoHeads()
    ddp = DDP(model, gradient_as_bucket_view=True)
    x = strata.randn(4, 6)
    assert ddp(x).tolist() == model(x).tolist()
    assert list(ddp.state_dict()) == ["module." + k for k in model.state_dict()]
    optimizer = strata.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    before = model.b.weight.tolist()
    for _ in range(2):
        optimizer.zero_grad()
        ddp(x).sum().backward()
        optimizer.step()
    assert model.b.weight.grad is None and model.b.weight.tolist() == before
    assert model.a.weight.grad is not None
    with ddp.no_sync():
        ddp(x).sum().backward()
    # Dropping the wrapper takes its hooks off; the module trains on alone, and can be wrapped again.
    del ddp
    model.zero_grad()
    model(x).sum().backward()
    plain = model.a.weight.grad.tolist()
    again = DDP(model)
    model.zero_grad()
    again(x).sum().backward()
    assert model.a.weight.grad.tolist() == plain


def worker():
    """Run by mpirun on every rank: collectives under PyTorch's names and DDP's semantics between two processes."""
    dist.init_process_group(backend="mpi")
    rank, n = dist.get_rank(), dist.get_world_size()
    assert n == 2, n
    t = strata.tensor([1.0, 2.0]) * (rank + 1)
    dist.all_reduce(t)
    assert t.tolist() == [3.0, 6.0], t
    t = strata.tensor([1.0, 2.0]) * (rank + 1)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert t.tolist() == [2.0, 4.0], t
    t = strata.tensor([1.0, 2.0]) * (rank + 1)
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    while not work.is_completed():
        pass
    assert t.tolist() == [1.5, 3.0], t  # is_completed(): the result is there
    b = strata.full((3,), float(rank))
    dist.broadcast(b, src=1)
    assert b.tolist() == [1.0] * 3, b
    mine = strata.tensor([rank, 10 + rank])
    flat, stacked = strata.zeros(4, dtype=strata.int64), strata.zeros(2, 2, dtype=strata.int64)
    dist.all_gather_into_tensor(flat, mine)
    dist.all_gather_into_tensor(stacked, mine)
    assert flat.tolist() == [0, 10, 1, 11] and stacked.tolist() == [[0, 10], [1, 11]], (flat, stacked)
    parts = [strata.zeros(2, dtype=strata.int64) for _ in range(2)]
    dist.all_gather(parts, mine)
    assert [p.tolist() for p in parts] == [[0, 10], [1, 11]]
    out = strata.zeros(2)
    dist.reduce_scatter_tensor(out, strata.arange(4, dtype=strata.float32) + rank)  # rows [0,1] and [2,3], +rank
    assert out.tolist() == ([1.0, 3.0] if rank == 0 else [5.0, 7.0]), out
    try:
        dist.all_reduce(strata.ones(2, dtype=strata.float16))
        raise AssertionError("an f16 all_reduce was staged without the opt-in")
    except strata.DTypeError as e:
        assert "convert it to f32 yourself" in str(e) and "stage_through_host=True" in str(e), e
    dist.barrier()

    # DDP: head b is used on rank 0 only and gets the average over both ranks; then no rank uses it.
    strata.manual_seed(3)
    model = TwoHeads()
    ddp = DDP(model)
    x = strata.randn(4, 6)  # the same on both ranks
    model.use_b = rank == 0
    ddp(x).sum().backward()
    strata.manual_seed(3)
    alone = TwoHeads()
    alone.use_b = True
    alone(x).sum().backward()
    assert (model.b.weight.grad - alone.b.weight.grad / 2).abs().max().item() < 1e-6
    model.use_b = False
    optimizer = strata.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    before = model.b.weight.tolist()
    for _ in range(2):
        optimizer.zero_grad()
        ddp(x).sum().backward()
        optimizer.step()
    assert model.b.weight.grad is None and model.b.weight.tolist() == before
    sampler = strata.utils.data.DistributedSampler(list(range(10)))
    assert sampler.num_replicas == 2 and sampler.rank == rank
    print(f"rank {rank}: ok", flush=True)
    dist.destroy_process_group()


def mpirun(*args, timeout=120):
    if MPIRUN is None:
        pytest.skip("no mpirun (Debian's openmpi-bin)")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [MPIRUN, "-np", "2", "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return subprocess.run(command + [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_two_ranks_under_mpirun():
    result = mpirun(str(HERE), "worker")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 0: ok" in result.stdout and "rank 1: ok" in result.stdout, result.stdout + result.stderr


def test_the_tutorial_trains_on_two_ranks_as_one_process(tmp_path):
    two, one = tmp_path / "two.pt", tmp_path / "one.pt"
    result = mpirun(str(TUTORIAL), "--out", str(two))
    assert result.returncode == 0, result.stdout + result.stderr
    alone = subprocess.run([sys.executable, str(TUTORIAL), "--out", str(one)], capture_output=True, text=True,
                           timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert alone.returncode == 0, alone.stderr
    assert "over a world of 2" in result.stdout and "over a world of 1" in alone.stdout
    a, b = strata.load(str(two)), strata.load(str(one))
    assert list(a) == list(b)
    for k in a:
        assert (a[k] - b[k]).abs().max().item() < 1e-5, k
    # Both learned: the last epoch's loss is well below the first's (ln 4 = 1.39 at the start).
    last = float(result.stdout.strip().splitlines()[-1].split("loss ")[1].split()[0])
    assert last < 0.3, result.stdout


if __name__ == "__main__" and sys.argv[1:] == ["worker"]:
    worker()
