"""strata.distributed: torch.distributed's names over Strata's process group. Launch with mpirun (Open MPI): every
rank runs the script, init_process_group() joins the world, and the collectives move CPU tensors through MPI and GPU
tensors through NCCL. Without a launcher the world is one process, in which every collective is the identity."""
import datetime

from strata import _C

_d = _C._distributed

ReduceOp = _d.ReduceOp
Work = _d.Work

# The world of init_process_group(), or None. The C++ world, once built, lives until the process exits (MPI cannot
# start again after it stops): destroy_process_group() only forgets it here, and init_process_group() takes it back.
_world = None


class group:
    """torch.distributed.group: WORLD is the default group (None means the same), the only one Strata has."""
    WORLD = None


def is_available():
    return True


def is_torchelastic_launched():
    return False


def is_initialized():
    return _world is not None


def _default_group(group=None, what="this call"):
    if _world is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    if group is not None and group is not _world:
        raise ValueError(f"{what}: Strata has one process group, the world (pass group=None)")
    return _world


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None, *, stage_through_host=False):
    """Joins the world that mpirun launched (a world of one without a launcher). backend may be None, "mpi" or
    "nccl" (CPU tensors go through MPI and GPU tensors through NCCL whichever is named); Strata has no gloo.
    world_size and rank, when given, must be the launcher's. stage_through_host (Strata's own) lets collectives
    stage what MPI cannot take as it is through host memory: GPU tensors without NCCL, f16/bf16 reductions."""
    global _world
    if _world is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if backend is not None and str(backend).lower() not in ("mpi", "nccl", "mpi+nccl", "undefined"):
        raise ValueError(f"init_process_group: backend {backend!r} is not Strata's: its transport between processes "
                         f"is MPI (backend='mpi', or None), GPU tensors going through NCCL; launch with mpirun")
    if init_method not in (None, "env://"):
        raise NotImplementedError(f"init_process_group: init_method {init_method!r}: Strata has no rendezvous of its "
                                  f"own; mpirun starts the ranks and tells each where it is")
    if store is not None:
        raise NotImplementedError("init_process_group: Strata has no store; mpirun starts the ranks")
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"init_process_group: timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    seconds = None if timeout is None else timeout.total_seconds()
    world = _d.init(seconds, bool(stage_through_host))
    if world_size not in (-1, None) and world_size != world.size():
        raise ValueError(f"init_process_group: world_size={world_size}, but the launcher started {world.size()} "
                         f"ranks")
    if rank not in (-1, None) and rank != world.rank():
        raise ValueError(f"init_process_group: rank={rank}, but the launcher made this process rank {world.rank()}")
    _world = world


def destroy_process_group(group=None):
    """Forgets the default group: collectives then need init_process_group() again, which rejoins the same world
    (the processes stay connected until they exit)."""
    global _world
    _default_group(group, "destroy_process_group")
    _world = None


def get_rank(group=None):
    return _default_group(group, "get_rank").rank()


def get_world_size(group=None):
    return _default_group(group, "get_world_size").size()


def get_backend(group=None):
    return _default_group(group, "get_backend").backend_name()


def _finish(work, async_op):
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces `tensor` over the ranks in place: every rank ends with the result."""
    return _finish(_default_group(group, "all_reduce").all_reduce(tensor, op), async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copies rank `src`'s tensor into every rank's `tensor`."""
    if src is None:
        src = 0 if group_src is None else group_src
    return _finish(_default_group(group, "broadcast").broadcast(tensor, src), async_op)


def _stacked(big, small, what, world_size):
    # torch's layouts: [world_size * d0, ...] (concatenated) or [world_size, *shape] (stacked); both are the
    # same memory as [world_size, *shape].
    if big.numel() != small.numel() * world_size or not big.is_contiguous():
        raise ValueError(f"{what}: the larger tensor must be contiguous and hold world_size ({world_size}) times "
                         f"the other's {small.numel()} elements, not {big.numel()} ({tuple(big.shape)})")
    return big.view((world_size,) + tuple(small.shape))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Gathers every rank's input into output, rank by rank: output is [world_size * n, ...] or [world_size, n, ...]."""
    world = _default_group(group, "all_gather_into_tensor")
    out = _stacked(output_tensor, input_tensor, "all_gather_into_tensor", world.size())
    return _finish(world.all_gather(out, input_tensor), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces input over the ranks; rank r receives row r of the result: input is world_size times output."""
    world = _default_group(group, "reduce_scatter_tensor")
    rows = _stacked(input, output, "reduce_scatter_tensor", world.size())
    return _finish(world.reduce_scatter(output, rows, op), async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fills tensor_list[r] with rank r's tensor."""
    import strata
    world = _default_group(group, "all_gather")
    if len(tensor_list) != world.size():
        raise ValueError(f"all_gather: tensor_list holds {len(tensor_list)} tensors for a world of {world.size()}")
    out = strata.empty((world.size(),) + tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device)
    world.all_gather(out, tensor.contiguous()).wait()
    for r, t in enumerate(tensor_list):
        t.copy_(out[r])
    return _finish(_Done(), async_op)


class _Done:
    def wait(self):
        return True

    def is_completed(self):
        return True


def barrier(group=None, async_op=False, device_ids=None):
    """Returns on every rank once every rank has called it."""
    return _finish(_default_group(group, "barrier").barrier(), async_op)
