"""strata.nn.parallel: DistributedDataParallel, as torch.nn.parallel's."""
import contextlib

import strata
from strata import _C
from strata import distributed
from strata.nn.module import Module


class DistributedDataParallel(Module):
    """Data-parallel training across the ranks of strata.distributed: every rank holds the whole module and trains on
    its own shard of each batch; backward averages the gradients over the ranks, bucket by bucket while it runs
    (strata/dist/ddp.h: Note [Gradient buckets]). Rank 0's parameters and buffers are broadcast when it is built.
    ddp(x) runs the module; ddp.module is the module itself. Dropping the wrapper takes its hooks off the parameters.

    As c10d: a parameter no rank used in a pass keeps its gradient untouched, and one used on some ranks only gets
    the average over all of them, whatever find_unused_parameters says (Strata finds them at no extra cost);
    gradient_as_bucket_view makes each grad a view into its bucket. device_ids and output_device, where given, must
    name the device the module is on (one device per process); static_graph is accepted and changes nothing."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected a strata.nn.Module, got {type(module).__name__}")
        world = distributed._default_group(process_group, "DistributedDataParallel")
        if dim != 0:
            raise NotImplementedError("DistributedDataParallel: only dim=0 (each rank feeds its own batch)")
        params = list(module.parameters())
        device = params[0].device if params else None
        named = list(device_ids or []) + ([output_device] if output_device is not None else [])
        for d in named if device is not None else []:
            d = strata.device(f"{device.type}:{d}" if isinstance(d, int) else d)
            if d != device:
                raise ValueError(f"DistributedDataParallel: device {d} given, but the module is on {device}; move the "
                                 f"module there first (one device per process)")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        object.__setattr__(self, "_world", world)
        with strata.no_grad():
            works = [world.broadcast(t, 0) for t in params + list(module.buffers())]
            for w in works:
                w.wait()
        cap = 25 if bucket_cap_mb is None else bucket_cap_mb
        if cap <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, not {bucket_cap_mb}")
        trained = [p for p in params if p.requires_grad]
        reducer = _C._distributed.GradientReducer(trained, world, int(cap * (1 << 20)), min(1 << 20,
                                                  int(cap * (1 << 20))), bool(gradient_as_bucket_view))
        object.__setattr__(self, "_reducer", reducer)

    def forward(self, *inputs, **kwargs):
        # As PyTorch: in training, rank 0's buffers (BatchNorm's running statistics) reach every rank first.
        if self.broadcast_buffers and self.training and self._world.size() > 1:
            with strata.no_grad():
                works = [self._world.broadcast(b, 0) for b in self.module.buffers()]
                for w in works:
                    w.wait()
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward accumulates gradients locally; the first backward after it averages what accumulated."""
        previous = self._reducer.sync
        self._reducer.sync = False
        try:
            yield
        finally:
            self._reducer.sync = previous

    def _bucket_layout(self):
        """Buckets as indices into the trained parameters, in the order they are reduced."""
        return self._reducer.bucket_layout()

    @property
    def last_wait_seconds(self):
        """Seconds the last backward waited at its end for the all-reduces backward did not hide."""
        return self._reducer.last_wait_seconds
