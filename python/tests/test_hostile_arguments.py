"""Bad arguments from Python get a typed error naming what was wrong, never a crash, a hang or a wrong result (issue
38). Calls that crashed or hung before run in a subprocess with a timeout, so that the suite itself never does."""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import strata
from strata import nn


def run_isolated(code, timeout=60):
    """Runs `code` in a fresh interpreter; returns its exit status and its output."""
    result = subprocess.run([sys.executable, "-c", "import strata, numpy as np\n" + textwrap.dedent(code)],
                            capture_output=True, text=True, timeout=timeout)
    return result.returncode, result.stdout + result.stderr


def assert_clean_error(code, error, timeout=60):
    """`code` raises `error` (a name in strata) in a subprocess, instead of crashing or hanging."""
    status, output = run_isolated(f"""
        try:
        {textwrap.indent(textwrap.dedent(code), '    ')}
        except strata.{error} as e:
            print("RAISED", type(e).__name__, e)
        """, timeout)
    assert status == 0 and "RAISED" in output, output
    return output


# --- shapes ---

@pytest.mark.parametrize("call", ["strata.zeros('3')", "strata.ones(2, 3).reshape('6')", "strata.zeros(b'12')"])
def test_a_string_is_no_shape(call):
    output = assert_clean_error(call, "TypeError")
    assert "not str" in output or "not bytes" in output


def test_shapes_from_ranges_and_arrays_keep_their_items_alive():
    status, output = run_isolated("""
        for i in range(300):
            assert strata.zeros(np.array([1000 + i % 7, 3])).shape == (1000 + i % 7, 3)
            assert strata.zeros(range(1000, 1002)).shape == (1000, 1001)
        print("OK")
        """)
    assert status == 0 and "OK" in output, output


def test_shapes_take_integer_tensors_arrays_and_sizes():
    assert strata.zeros(strata.tensor([2, 3])).shape == (2, 3)
    assert strata.zeros(np.array([2, 3], dtype=np.int32)).shape == (2, 3)
    assert strata.ones(6).reshape(strata.tensor([2, 3])).shape == (2, 3)
    assert strata.zeros(strata.Size([2, 3])).shape == (2, 3)
    assert strata.zeros(2, strata.tensor(3)).shape == (2, 3) and strata.zeros(strata.tensor(3)).shape == (3,)
    assert nn.LayerNorm(np.array([3]))(strata.ones(2, 3)).shape == (2, 3)


def test_shape_is_a_strata_size():
    t = strata.ones(2, 3)
    assert isinstance(t.shape, strata.Size) and isinstance(t.shape, tuple)
    assert t.shape == (2, 3) and t.size() == strata.Size([2, 3])
    assert t.shape.numel() == 6 and isinstance(t.shape[1:], strata.Size)
    assert repr(t.shape) == "strata.Size([2, 3])"


@pytest.mark.parametrize("bad, named", [([2.5], "float"), ([[2]], "list"), ({"a": 1}, "dict"), (None, "None"),
                                        (np.array([2.0]), "float64"), (strata.ones(2), "float32")])
def test_shapes_refuse_other_types_naming_them(bad, named):
    with pytest.raises(strata.TypeError, match=named):
        strata.zeros(bad)


def test_shapes_have_at_most_64_dims():
    assert strata.zeros(*[1] * 64).dim() == 64
    with pytest.raises(strata.InvalidArgumentError, match="64"):
        strata.zeros(*[1] * 65)
    output = assert_clean_error("repr(strata.zeros(*[1] * 100000))", "InvalidArgumentError")
    assert "100000" in output


def test_a_deeper_tensor_prints_its_shape_alone():
    t = strata.ones(1)
    for _ in range(70):
        t = t.unsqueeze(0)
    assert "71 dims" in repr(t)


def test_negative_sizes_name_the_argument():
    with pytest.raises(strata.InvalidArgumentError, match="size must not be negative"):
        strata.zeros(-3)
    with pytest.raises(strata.InvalidArgumentError, match=r"LayerNorm\(\): normalized_shape must not be negative"):
        nn.LayerNorm(-3)


# --- read-only NumPy memory ---

def test_a_read_only_memmap_is_copied_never_written(tmp_path):
    path = tmp_path / "values.bin"
    np.arange(4, dtype=np.float32).tofile(path)
    status, output = run_isolated(f"""
        import warnings
        array = np.memmap({str(path)!r}, dtype=np.float32, mode="r")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t = strata.from_numpy(array)
        t.fill_(1.0)
        print(t.tolist(), array.tolist(), [str(w.message) for w in caught])
        """)
    assert status == 0, output
    assert "[1.0, 1.0, 1.0, 1.0] [0.0, 1.0, 2.0, 3.0]" in output and "read-only" in output
    assert np.fromfile(path, dtype=np.float32).tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("make", [lambda: np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)),
                                  lambda: np.frombuffer(bytes(16), dtype=np.float32)])
@pytest.mark.parametrize("convert", [strata.from_numpy, strata.as_tensor])
def test_read_only_arrays_are_copied(make, convert):
    array = make()
    before = array.copy()
    with pytest.warns(UserWarning, match="read-only"):
        t = convert(array)
    t.fill_(7.0)
    assert (array == before).all() and (t.numpy() == 7.0).all()


def test_writeable_arrays_are_still_shared():
    array = np.zeros(3, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        strata.from_numpy(array).fill_(2.0)
    assert array.tolist() == [2.0, 2.0, 2.0]


# --- tensors that were never made ---

@pytest.mark.parametrize("call", ["repr(strata.Tensor.__new__(strata.Tensor))",
                                  "strata.nn.Parameter.__new__(strata.nn.Parameter) + 1",
                                  "strata.add(strata.Tensor.__new__(strata.Tensor), strata.ones(1))",
                                  "strata.Tensor.__new__(strata.Tensor).shape",
                                  "strata.ones(2).copy_(strata.Tensor.__new__(strata.Tensor))"])
def test_an_uninitialised_tensor_raises(call):
    output = assert_clean_error(call, "InvalidArgumentError")
    assert "never initialised" in output


def test_parameter_of_still_wraps_a_tensor():
    t = strata.ones(2)
    assert nn.Parameter._of(t).shape == (2,)


# --- forged DLPack capsules ---

TESTS = os.path.dirname(os.path.abspath(__file__))  # where dlpack_structs.py is

FORGED = """
import ctypes, sys
sys.path.insert(0, {tests!r})
from dlpack_structs import DLDataType, DLDevice, DLManagedTensor

buffer = (ctypes.c_float * 4)()
shape = (ctypes.c_int64 * 1)(4)
managed = DLManagedTensor()
managed.dl_tensor.data = ctypes.cast(buffer, ctypes.c_void_p)
managed.dl_tensor.device = DLDevice(1, 0)
managed.dl_tensor.ndim = 1
managed.dl_tensor.dtype = DLDataType(2, 32, 1)
managed.dl_tensor.shape = shape
{forge}
PyCapsule_New = ctypes.pythonapi.PyCapsule_New
PyCapsule_New.restype = ctypes.py_object
PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
capsule = PyCapsule_New(ctypes.addressof(managed), b"dltensor", None)
try:
    print(strata.from_dlpack(capsule).tolist())
except strata.InvalidArgumentError as e:
    print("RAISED", e)
"""


def test_an_honest_capsule_is_taken():
    status, output = run_isolated(FORGED.format(tests=TESTS, forge=""))
    assert status == 0 and "[0.0, 0.0, 0.0, 0.0]" in output, output


MMAP = """
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
managed.dl_tensor.data = libc.mmap(None, 4096, {prot}, 0x22, -1, 0)  # MAP_PRIVATE | MAP_ANONYMOUS
{after}
"""


@pytest.mark.parametrize("forge, says", [
    ("managed.dl_tensor.ndim = 100000", "ndim is 100000"),
    ("managed.dl_tensor.shape = ctypes.cast(ctypes.c_void_p(8), ctypes.POINTER(ctypes.c_int64))",
     "not in readable memory"),
    ("managed.dl_tensor.data = ctypes.c_void_p(4096 * 16)", "not all memory of this process"),
    (MMAP.format(prot=3, after="libc.munmap(managed.dl_tensor.data, 4096)"), "not all memory of this process"),
    # PROT_NONE: mapped, yet no memory to read.
    (MMAP.format(prot=0, after=""), "not all memory of this process"),
])
def test_a_forged_capsule_is_refused(forge, says):
    status, output = run_isolated(FORGED.format(tests=TESTS, forge=forge))
    assert status == 0 and "RAISED" in output and says in output, output


def test_a_byte_offset_of_2_to_the_40_never_crashes():
    status, output = run_isolated(FORGED.format(tests=TESTS, forge="managed.dl_tensor.byte_offset = 2**40"))
    assert status == 0, output
    # Under AddressSanitizer that address may lie in the sanitizer's own mapped reserve: then it is read, harmlessly.
    assert "RAISED" in output or "asan" in os.environ.get("LD_PRELOAD", ""), output


# --- indices ---

def test_an_index_of_many_nones_is_refused_at_once():
    output = assert_clean_error("strata.ones(2)[(None,) * 100000]", "IndexError", timeout=30)
    assert "at most 64" in output
    assert strata.ones(2)[(None,) * 63].dim() == 64


def test_an_int_index_beyond_64_bits_is_an_index_error():
    with pytest.raises(strata.IndexError, match="9223372036854775808"):
        strata.ones(3)[2**63]
    assert strata.ones(3)[: 2**70].shape == (3,)


def test_negative_values_in_index_tensors_count_from_the_end(device):
    t = strata.arange(5, device=device)
    assert t[strata.tensor([-1, 0, -5], device=device)].tolist() == [4, 0, 0]
    m = strata.arange(6, device=device).reshape(2, 3)
    assert m[:, strata.tensor([-1], device=device)].tolist() == [[2], [5]]
    index = strata.tensor([-1, 1])
    strata.ones(3)[index]
    assert index.tolist() == [-1, 1]


@pytest.mark.parametrize("value", [5, -6])
def test_an_index_tensor_value_out_of_range_is_an_index_error(value):
    with pytest.raises(strata.IndexError, match=f"index {value} is out of bounds for dimension 0 with size 5"):
        strata.arange(5)[strata.tensor([0, value])]


# --- wrong results that were silent ---

def test_t_refuses_more_than_two_dims():
    with pytest.raises(strata.ShapeError, match="at most 2 dimensions"):
        strata.ones(2, 3, 4).t()
    assert strata.arange(3).t().tolist() == [0, 1, 2]
    assert strata.ones(2, 3).t().shape == (3, 2)


def test_a_negative_device_index_is_refused_as_in_strings():
    with pytest.raises(strata.InvalidArgumentError):
        strata.device("cpu:-1")
    with pytest.raises(strata.InvalidArgumentError, match="non-negative"):
        strata.device("cpu", -1)
    assert strata.device("cpu", 0) == "cpu"


def test_in_place_with_an_array_raises_and_keeps_the_tensor():
    t = strata.ones(2)
    with pytest.raises(TypeError, match="ndarray"):
        t += np.ones(2, dtype=np.float32)
    assert isinstance(t, strata.Tensor) and t.tolist() == [1.0, 1.0]


def test_data_of_a_tensor_that_requires_grad_stays_floating():
    p = nn.Parameter(strata.ones(2))
    with pytest.raises(strata.DTypeError, match="floating point"):
        p.data = strata.zeros(2, dtype=strata.int64)
    assert p.dtype == strata.float32 and p.requires_grad
    p.data = strata.zeros(2, dtype=strata.float64)
    assert p.dtype == strata.float64
    plain = strata.ones(2)
    plain.data = strata.zeros(2, dtype=strata.int64)
    assert plain.dtype == strata.int64


# --- messages ---

def _optimizer():
    return strata.optim.SGD([strata.ones(2, requires_grad=True)], lr=0.1)


def _set_grad():
    strata.ones(2, requires_grad=True).grad = 5


BAD_CALLS = {
    "to(123)": (lambda: strata.ones(2).to(123), "to()"),
    "dtype string": (lambda: strata.zeros(3, dtype="float32"), "strata.float32"),
    "grad = 5": (_set_grad, "grad must be a Tensor or None, not int"),
    "backward('a')": (lambda: strata.ones(2, requires_grad=True).sum().backward("a"), "gradient must be a Tensor"),
    "clip_grad_norm_ of ints": (lambda: nn.utils.clip_grad_norm_([1, 2], 1.0), "parameters: each element"),
    "load_state_dict of ints": (lambda: _optimizer().load_state_dict({"step": 5}), "state_dict['step']"),
    "max with a string": (lambda: strata.max(strata.ones(2), "x"), "dim must be an int, not str"),
    "SGD of a bare tensor": (lambda: strata.optim.SGD(strata.ones(2, requires_grad=True), lr=0.1),
                             "iterable of tensors"),
    "Linear of a string": (lambda: nn.Linear("a", 3), "Linear(in_features: int"),
    "size of a string": (lambda: strata.ones(2).size("a"), "dim must be an int, not str"),
    "sum over a string": (lambda: strata.ones(2).sum(dim="a"), "dim must be"),
    "index with a float": (lambda: strata.ones(2)[1.5], "float"),
    "device of a float": (lambda: strata.device(3.5), "device(type: str"),
    "requires_grad of a string": (lambda: setattr(strata.ones(2), "requires_grad", "x"),
                                  "Tensor.requires_grad: cannot assign a str; it takes bool"),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_arguments_get_a_typed_message_in_python_terms(name):
    call, says = BAD_CALLS[name]
    with pytest.raises(strata.Error) as caught:
        call()
    assert isinstance(caught.value, (TypeError, ValueError, IndexError)), type(caught.value)
    message = str(caught.value)
    assert says in message
    for cpp in ("Unable to cast", "C++", "strata._C", "NoGradGuard", "DType::", "std::", "incompatible function"):
        assert cpp not in message


def test_a_failed_call_names_types_not_values():
    big = strata.ones(100000)
    with pytest.raises(strata.TypeError) as caught:
        big.add("x")
    message = str(caught.value)
    assert "Tensor.add(): got (str)" in message and "other: Tensor" in message and len(message) < 500


def test_the_two_tensor_max_is_chosen():
    assert strata.max(strata.tensor([1.0, 5.0]), strata.tensor([3.0, 2.0])).tolist() == [3.0, 5.0]


def test_cpp_names_in_strata_messages_become_python_names():
    conv = nn.Conv2d(1, 1, 3)
    with pytest.raises(strata.Error) as caught:
        conv(strata.ones(1, 1, 4, 4, dtype=strata.int64))
    assert "DType::" not in str(caught.value) and "strata.float32" in str(caught.value)


def test_load_names_a_bytes_path_as_given():
    with pytest.raises(OSError) as caught:
        strata.load(b"/nonexistent-strata-file")
    assert "b'" not in str(caught.value)



def test_strata_type_error_is_both_kinds():
    assert issubclass(strata.TypeError, TypeError) and issubclass(strata.TypeError, strata.InvalidArgumentError)


@pytest.mark.parametrize("data, error", [([[1, 2], [3]], strata.InvalidArgumentError), (2**70, strata.TypeError),
                                         (object(), strata.TypeError), (np.array(["a"]), strata.DTypeError)])
def test_tensor_of_bad_data_raises_strata_errors(data, error):
    with pytest.raises(error):
        strata.tensor(data)


def test_the_bindings_own_value_errors_are_strata_errors():
    with pytest.raises(strata.InvalidArgumentError, match="reduction must be"):
        nn.functional.mse_loss(strata.ones(2), strata.ones(2), reduction="bogus")
