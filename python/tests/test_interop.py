"""Zero-copy exchange with NumPy and DLPack, and who frees the memory."""
import ctypes
import gc

import numpy as np
import pytest

import strata
from dlpack_structs import DELETER, DLDataType, DLDevice, DLManagedTensor


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = strata.from_numpy(a)
    assert t.shape == (2, 3) and t.dtype == strata.float32
    a[0, 0] = 42.0
    assert t[0, 0].item() == 42.0
    t[1, 2] = -1.0
    assert a[1, 2] == -1.0
    assert np.shares_memory(t.numpy(), a)


def test_numpy_of_a_tensor_shares_memory_and_outlives_it():
    t = strata.arange(5, dtype=strata.float64)
    a = t.numpy()
    assert a.dtype == np.float64 and a.tolist() == [0, 1, 2, 3, 4]
    t[0] = 9.0
    assert a[0] == 9.0
    del t
    gc.collect()
    assert a.tolist() == [9, 1, 2, 3, 4]
    assert np.shares_memory(np.asarray(strata.from_numpy(a)), a)


def test_tensor_memory_outlives_the_array():
    a = np.ones(4, dtype=np.int64)
    t = strata.from_numpy(a)
    del a
    gc.collect()
    assert t.tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64])
def test_every_numpy_dtype_round_trips(dtype):
    a = (np.arange(6) % 2).astype(dtype)
    t = strata.from_numpy(a)
    b = t.numpy()
    assert b.dtype == a.dtype and np.shares_memory(a, b) and (a == b).all()


def test_views_with_offsets_and_strides_round_trip_without_copies():
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    view = base[1:5:2, 3:9:3]  # an offset and strides in both dims
    t = strata.from_numpy(view)
    assert t.shape == (2, 2) and t.stride() == (20, 3)
    assert t.tolist() == view.tolist()
    back = t.numpy()
    assert np.shares_memory(back, base) and back.strides == view.strides
    # Strata's own views go out as views too.
    s = strata.arange(24, dtype=strata.float32).reshape(4, 6)[1:, ::2].t()
    a = s.numpy()
    assert a.tolist() == s.tolist() and a.strides == (8, 24)
    assert np.shares_memory(a, s.numpy())


def test_from_numpy_refuses_what_it_cannot_share():
    with pytest.raises(ValueError, match="strides"):
        strata.from_numpy(np.arange(4.0)[::-1])
    with pytest.raises(TypeError):
        strata.from_numpy(np.zeros(2, dtype=np.complex64))
    with pytest.raises(TypeError):
        strata.from_numpy([1, 2, 3])


def test_numpy_refuses_tensors_that_require_grad():
    t = strata.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        t.numpy()
    assert t.detach().numpy().tolist() == [1, 1]


def test_tensor_copies_and_as_tensor_shares():
    a = np.zeros(3, dtype=np.float32)
    assert not np.shares_memory(strata.tensor(a).numpy(), a)
    assert np.shares_memory(strata.as_tensor(a).numpy(), a)


def test_dlpack_device():
    assert strata.ones(2).__dlpack_device__() == (1, 0)


def test_dlpack_round_trip_through_strata_shares_memory():
    t = strata.arange(6, dtype=strata.float32).reshape(2, 3)[:, 1:]
    u = strata.from_dlpack(t)
    assert u.data_ptr() == t.data_ptr() and u.stride() == t.stride() and u.tolist() == t.tolist()


def test_numpy_consumes_strata_dlpack_and_the_deleter_runs_once():
    t = strata.arange(8, dtype=strata.float32)
    owners = strata.storage_use_count(t)
    a = np.from_dlpack(t)
    assert np.shares_memory(a, t.numpy())
    assert strata.storage_use_count(t) == owners + 1  # the exported tensor holds the memory
    del a
    gc.collect()
    assert strata.storage_use_count(t) == owners


def test_an_unconsumed_capsule_releases_the_memory():
    t = strata.ones(4)
    owners = strata.storage_use_count(t)
    capsule = t.__dlpack__()
    assert strata.storage_use_count(t) == owners + 1
    del capsule
    gc.collect()
    assert strata.storage_use_count(t) == owners


def test_a_capsule_is_consumed_once():
    capsule = strata.ones(2).__dlpack__()
    strata.from_dlpack(capsule)
    with pytest.raises(ValueError, match="consumed"):
        strata.from_dlpack(capsule)


def test_from_dlpack_of_numpy_shares_memory():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)[1:, ::2]
    t = strata.from_dlpack(a)
    assert t.tolist() == a.tolist() and np.shares_memory(t.numpy(), a)


# A DLPack producer written with ctypes, to count its deleter's calls.
# The destructor takes the capsule as a raw pointer: a py_object argument would revive a capsule being freed.
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Producer:
    """Owns a buffer of float32 and hands it out as a DLPack capsule; counts deleter calls."""

    def __init__(self, values, code=2, bits=32, byte_offset=0):
        self.buffer = (ctypes.c_float * len(values))(*values)
        self.shape = (ctypes.c_int64 * 1)(len(values) - byte_offset // 4)
        self.deleted = 0
        self.deleter = DELETER(self._delete)
        self.managed = DLManagedTensor()
        dl = self.managed.dl_tensor
        dl.data = ctypes.cast(self.buffer, ctypes.c_void_p)
        dl.device = DLDevice(1, 0)
        dl.ndim = 1
        dl.dtype = DLDataType(code, bits, 1)
        dl.shape = self.shape
        dl.strides = None
        dl.byte_offset = byte_offset
        self.managed.deleter = self.deleter

    def _delete(self, _):
        self.deleted += 1

    def capsule(self):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        self.destructor = CAPSULE_DESTRUCTOR(self._capsule_destructor)
        return new(ctypes.addressof(self.managed), b"dltensor", ctypes.cast(self.destructor, ctypes.c_void_p))

    def _capsule_destructor(self, capsule):
        # As the protocol says: an unconsumed capsule runs the deleter, a consumed one does not.
        is_valid = ctypes.pythonapi.PyCapsule_IsValid
        is_valid.restype = ctypes.c_int
        is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        if is_valid(capsule, b"dltensor"):
            self._delete(None)


def test_the_producers_deleter_runs_exactly_once_when_the_last_view_dies():
    p = Producer([1.0, 2.0, 3.0, 4.0], byte_offset=4)
    t = strata.from_dlpack(p.capsule())
    gc.collect()
    assert t.tolist() == [2.0, 3.0, 4.0] and p.deleted == 0
    view = t[1:]
    del t
    gc.collect()
    assert p.deleted == 0
    assert view.tolist() == [3.0, 4.0]
    del view
    gc.collect()
    assert p.deleted == 1


def test_a_refused_capsule_stays_with_its_producer():
    p = Producer([1.0, 2.0], code=5, bits=64)  # complex: no Strata dtype
    capsule = p.capsule()
    with pytest.raises(strata.DTypeError, match="complex"):
        strata.from_dlpack(capsule)
    assert p.deleted == 0
    del capsule
    gc.collect()
    assert p.deleted == 1


def test_dlpack_keywords_of_the_array_api():
    t = strata.arange(3, dtype=strata.float32)
    copy = strata.from_dlpack(t.__dlpack__(copy=True, max_version=(1, 0), dl_device=(1, 0)))
    assert copy.tolist() == [0.0, 1.0, 2.0] and copy.data_ptr() != t.data_ptr()
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))


def test_operators_with_numpy_arrays_give_tensors_on_either_side():
    t = strata.ones(2)
    for result in (t + np.ones(2), np.ones(2) + t, t * np.full(2, 3.0, dtype=np.float32), np.ones(2) - t):
        assert isinstance(result, strata.Tensor)
    assert (t + np.ones(2)).tolist() == [2.0, 2.0] and (t + np.ones(2)).dtype == strata.float64  # promoted
    assert (np.full(2, 5.0, dtype=np.float32) - t).tolist() == [4.0, 4.0]
    assert (t == np.ones(2, dtype=np.float32)).tolist() == [True, True]
    with pytest.raises(TypeError):
        t + [1, 2]  # a list is no array: Python's TypeError, as PyTorch's
