# Makes Debian's CPU-only PyTorch pass for a CUDA one: events are wall-clock timers, synchronisations no-ops, and
# torch.device("cuda...") the CPU. Only to walk bench/compare-pytorch/run through on a machine without a GPU.
import time
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    class Event:
        def __init__(self, enable_timing=False): self.t = None
        def record(self, stream=None): self.t = time.perf_counter()
        def synchronize(self): pass
        def elapsed_time(self, other): return (other.t - self.t) * 1e3
    class S: cuda_stream = 0
    torch.cuda.is_available = lambda: True
    torch.cuda.Event = Event
    torch.cuda.synchronize = lambda *a: None
    torch.cuda.get_device_name = lambda *a: "fake (CPU)"
    torch.cuda.current_stream = lambda *a: S()
    _device = torch.device
    torch.device = lambda *a, **k: _device("cpu") if a and str(a[0]).startswith("cuda") else _device(*a, **k)
