"""strata.cuda: whether GPUs are usable, and their memory, as torch.cuda."""
from strata import _C


def is_available():
    """True when the CUDA plugin loaded and at least one GPU is usable."""
    return _C.cuda_is_available()


def device_count():
    return _C.cuda_device_count()


def unavailable_reason():
    """Why CUDA is unavailable, in one line; empty when it is available."""
    return _C.cuda_unavailable_reason()


def current_device():
    return _C.cuda_current_device()


def set_device(device):
    _C.cuda_set_device(_index(device))


def get_device_name(device=None):
    return _C.cuda_device_name(_index(device))


def synchronize(device=None):
    _C.synchronize(_device(device))


def manual_seed(seed):
    """Ignored without a GPU, as PyTorch's. With one, Strata's generators are seeded together: this seeds every
    device's, the CPU's included (strata.manual_seed)."""
    if is_available():
        _C.manual_seed(seed)


manual_seed_all = manual_seed


def _index(device):
    if device is None:
        return _C.cuda_current_device()
    if isinstance(device, int):
        return device
    index = _C.device(device).index if isinstance(device, str) else device.index
    return _C.cuda_current_device() if index is None else index


def _device(device):
    return _C.device("cuda", _index(device))


def memory_stats(device=None):
    return _C.memory_stats(_device(device))


def memory_allocated(device=None):
    return _C.memory_allocated(_device(device))


def max_memory_allocated(device=None):
    return _C.max_memory_allocated(_device(device))


def memory_reserved(device=None):
    return _C.memory_reserved(_device(device))


def max_memory_reserved(device=None):
    return _C.max_memory_reserved(_device(device))


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory_stats(_device(device))


def empty_cache():
    for index in range(device_count()):
        _C.empty_cache(_C.device("cuda", index))


def set_per_process_memory_fraction(fraction, device=None):
    _C.set_memory_fraction(_device(device), fraction)
