"""strata.profiler: a recording of ops, copies, synchronisations and allocator events, as torch.profiler.

    with strata.profiler.profile() as prof:
        with strata.profiler.record_function("step"):
            loss = model(x).sum()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")   # open in Perfetto or chrome://tracing

The recorder is the C++ one (strata/runtime/profiler.h, Note [The profiler]): every kernel call with its op name,
device, stream and operand shapes; copies between devices with bytes and direction; synchronisations with their
cause; the caching allocator's segment allocations, frees, cache flushes and out-of-memory errors. Off, it costs one
relaxed atomic load per op. Times in key_averages() are microseconds, as in PyTorch.
"""

import json as _json

from strata import _C

__all__ = ["profile", "record_function", "ProfilerActivity", "EventList", "FunctionEventAvg"]


class ProfilerActivity:
    """Accepted for PyTorch's signature: Strata records the host and, on devices with events, device times."""
    CPU = "cpu"
    CUDA = "cuda"


class FunctionEventAvg:
    """One row of key_averages(): an op (or a record_function range) summed over its calls. Times in us."""

    def __init__(self, row):
        self.key = row["key"]
        self.count = row["count"]
        self.cpu_time_total = row["cpu_time_total_ns"] / 1e3
        self.self_cpu_time_total = row["self_cpu_time_total_ns"] / 1e3
        self.device_time_total = row["device_time_total_ns"] / 1e3
        self.cuda_time_total = self.device_time_total

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} count={self.count} "
                f"cpu_time_total={self.cpu_time_total:.3f}us>")


class EventList(list):
    """key_averages()'s rows, with PyTorch's table()."""

    def __init__(self, rows, result):
        super().__init__(rows)
        self._result = result

    def table(self, sort_by="cpu_time_total", row_limit=100, **unused):
        """The rows as text, the top `row_limit` by `sort_by` (cpu_time_total, self_cpu_time_total, cpu_time,
        count, device_time_total or cuda_time_total, device_time); -1 lists all."""
        return self._result.table(sort_by or "cpu_time_total", row_limit)


class profile:
    """Records while inside the `with` block (or between start() and stop()), as torch.profiler.profile.

    PyTorch's arguments are accepted; activities, record_shapes, profile_memory and with_stack change nothing
    (shapes and the allocator's events are always recorded, stacks never).
    """

    def __init__(self, activities=None, record_shapes=True, profile_memory=True, with_stack=False, **unused):
        self._result = None
        self._running = False

    def start(self):
        _C._profiler_start()
        self._running = True
        return self

    def stop(self):
        if self._running:
            self._running = False
            self._result = _C._profiler_stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def _finished(self):
        if self._result is None:
            raise RuntimeError("the profiler is still recording: leave the with block (or call stop()) first")
        return self._result

    def key_averages(self):
        result = self._finished()
        return EventList([FunctionEventAvg(row) for row in result.key_averages()], result)

    def events(self):
        """Every recorded event as a dict (kind: op, range, copy, sync or allocator; times in ns)."""
        return self._finished().events()

    def export_chrome_trace(self, path):
        """Writes the recording as a Chrome trace (JSON) to `path`, which Perfetto and chrome://tracing open."""
        self._finished().export_chrome_trace(str(path))

    def chrome_trace(self):
        """The Chrome trace as a parsed JSON object."""
        return _json.loads(self._finished().chrome_trace())


class record_function:
    """A named range on the timeline holding the ops called inside it (torch.profiler.record_function)."""

    def __init__(self, name):
        self._name = str(name)
        self._range = None

    def __enter__(self):
        self._range = _C._RecordFunction(self._name)
        return self

    def __exit__(self, *exc):
        self._range = None  # its C++ destructor ends the range now
        return False
