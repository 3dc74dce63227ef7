"""strata.accelerator (torch.accelerator): the accelerator this process can use, CUDA when a GPU is usable."""
import strata


def is_available():
    return strata.cuda.is_available()


def current_accelerator(check_available=False):
    """strata.device("cuda") when a GPU is usable, else None (Strata's GPU plugin is CUDA's)."""
    return strata.device("cuda") if strata.cuda.is_available() else None


def device_count():
    return strata.cuda.device_count() if is_available() else 0


def current_device_index():
    return strata.cuda.current_device() if is_available() else -1


current_device_idx = current_device_index


def set_device_index(device):
    strata.cuda.set_device(device)


set_device_idx = set_device_index


def synchronize(device=None):
    if is_available():
        strata.cuda.synchronize(device)
