"""strata.utils.tensorboard: as torch.utils.tensorboard, the SummaryWriter for scalars and histograms.

    from strata.utils.tensorboard import SummaryWriter
    writer = SummaryWriter()                      # runs/<date>_<host>
    writer.add_scalar("loss/train", loss, step)   # a float, an int, a 0-d tensor or a NumPy scalar
    writer.add_histogram("fc1.weight", model.fc1.weight, step)
    writer.close()

The files are written by the C++ writer (strata/io/summary_writer.h, Note [TensorBoard event files]): each record
reaches the file as soon as it is added, so `max_queue` and `flush_secs` are taken for PyTorch's signature and have
nothing to do; flush() asks the kernel to put the files on disk.
"""
import numbers
import os
import socket
from datetime import datetime

import numpy as _np

import strata
from strata import _C

__all__ = ["SummaryWriter"]


def _number(value, what):
    """A Python float of a number: bool, int, float, a NumPy scalar or 0-d array, or a one-element strata tensor."""
    if isinstance(value, strata.Tensor):
        if value.numel() != 1:
            raise strata.InvalidArgumentError(
                f"{what} must be a number or a tensor of one element, got a tensor of shape {tuple(value.shape)}")
        return float(value.item())
    if isinstance(value, _np.ndarray):
        if value.size != 1:
            raise strata.InvalidArgumentError(
                f"{what} must be a number or an array of one element, got an array of shape {value.shape}")
        value = value.reshape(()).item()
    if isinstance(value, (numbers.Real, _np.number, _np.bool_)):
        return float(value)
    raise TypeError(f"{what} must be a number, got {type(value).__name__}")


def _step(global_step):
    """The event's step: PyTorch writes 0 for None."""
    if global_step is None:
        return 0
    if isinstance(global_step, strata.Tensor):
        global_step = global_step.item()
    if isinstance(global_step, (bool, _np.bool_)) or not isinstance(global_step, (numbers.Integral, _np.integer)):
        raise TypeError(f"global_step must be an int, got {type(global_step).__name__}")
    return int(global_step)


def _walltime(walltime):
    return None if walltime is None else _number(walltime, "walltime")


class SummaryWriter:
    """Writes TensorBoard event files into `log_dir`, as torch.utils.tensorboard.SummaryWriter.

    `log_dir` defaults to runs/<month><day>_<hour>-<minute>-<second>_<host><comment>, as PyTorch's. `purge_step` is
    not supported (a value other than None raises NotImplementedError).
    """

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120, filename_suffix=""):
        if purge_step is not None:
            raise NotImplementedError("SummaryWriter(purge_step=...): purging earlier events is not supported")
        if log_dir is None:
            current_time = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", current_time + "_" + socket.gethostname() + comment)
        self.log_dir = os.fspath(log_dir)
        self._writer = _C._SummaryWriter(self.log_dir, filename_suffix)

    def get_logdir(self):
        return self.log_dir

    @property
    def file(self):
        """The event file this writer writes (add_scalars' files are in subdirectories)."""
        return self._writer.file

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        if new_style or double_precision:
            # PyTorch's new style writes a tensor summary with plugin metadata; this writer has simple_value only.
            raise NotImplementedError("add_scalar(new_style=True, double_precision=True) is not supported")
        self._writer.add_scalar(str(tag), _number(scalar_value, f"add_scalar('{tag}'): scalar_value"),
                                _step(global_step), _walltime(walltime))

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        values = {str(tag): _number(v, f"add_scalars('{main_tag}'): the value of '{tag}'")
                  for tag, v in tag_scalar_dict.items()}
        self._writer.add_scalars(str(main_tag), values, _step(global_step), _walltime(walltime))

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        """`values`: a strata tensor, a NumPy array or anything np.asarray takes; `bins`: "tensorflow" or a count."""
        if max_bins is not None:
            raise NotImplementedError("add_histogram(max_bins=...) is not supported")
        if not isinstance(values, strata.Tensor):
            array = _np.asarray(values)
            if array.dtype.kind not in "biuf":
                raise TypeError(f"add_histogram('{tag}'): values must be numbers, got an array of {array.dtype}")
            values = strata.from_numpy(_np.ascontiguousarray(array, dtype=_np.float64).reshape(-1))
        if not isinstance(bins, str):
            if isinstance(bins, (bool, _np.bool_)) or not isinstance(bins, (numbers.Integral, _np.integer)):
                raise TypeError(f"add_histogram('{tag}'): bins must be 'tensorflow' or an int, got {bins!r}")
            bins = int(bins)
        self._writer.add_histogram(str(tag), values, _step(global_step), bins, _walltime(walltime))

    def flush(self):
        self._writer.flush()

    def close(self):
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
