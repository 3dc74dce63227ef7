"""@strata.jit: Python functions translated into CUDA-dialect source and compiled by strata.RawKernel, launched as
Numba's cuda.jit kernels, here on the CPU. Each compile costs about a second, so one kernel checks many constructs:
the device functions below also run as plain Python (py_func), which gives the expected values."""

import inspect
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import strata

HERE = __file__
TPB = 8


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_KERNEL_CACHE", str(tmp_path / "kernels"))
    return tmp_path / "kernels"


def line_of(fn, text):
    """The line of `fn`'s source (in this file) that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    (i,) = [k for k, ln in enumerate(lines) if text in ln]
    return first + i


@strata.jit
def increment_by_one(an_array):
    pos = strata.grid(1)
    if pos < an_array.size:
        an_array[pos] += 1


@strata.jit
def increment_2d(an_array):
    x, y = strata.grid(2)
    if x < an_array.shape[0] and y < an_array.shape[1]:
        an_array[x, y] += 1


def test_increment_by_one_on_numpy_arrays_and_tensors_in_1d_and_2d():
    a = np.arange(1000, dtype=np.float32)
    increment_by_one[(1000 + 31) // 32, 32](a)  # NumPy arrays are used in place
    np.testing.assert_array_equal(a, np.arange(1000) + 1)
    t = strata.zeros(1000)
    increment_by_one.forall(t.numel())(t)
    increment_by_one.forall(t.numel(), tpb=64)(t)
    assert strata.equal(t, strata.full((1000,), 2.0))

    b = np.zeros((33, 17), np.int64)
    increment_2d[(5, 3), (8, 8)](b)  # more threads than elements: the bound test keeps them out
    np.testing.assert_array_equal(b, np.ones((33, 17)))
    t2 = strata.zeros(4, 5, dtype=strata.int32)
    increment_2d[(1, 1), (4, 5)](t2)
    assert t2.sum().item() == 20


@strata.jit(device=True)
def arith(i, x, out):
    """Every scalar construct, into out[i, :]. Runs as Python too (with NumPy's out), which gives what to expect."""
    j = i - 5  # negative for the first threads: // and % floor as Python's
    out[i, 0] = j // 3
    out[i, 1] = j % 3
    out[i, 2] = j / 4
    out[i, 3] = x // 0.75 + x % 0.75
    out[i, 4] = j ** 3 + 2.0 ** x
    out[i, 5] = (j << 2) + (i & 6) - (i | 1) + (i ^ 3) + (~i)
    b = 0 < i <= 6 and not i == 3 or i > 10
    out[i, 6] = b
    if j < -2:
        out[i, 7] = 1
    elif j < 2:
        out[i, 7] = 2
    else:
        out[i, 7] = 3
    s = 0
    for k in range(i):
        s += k
    for k in range(2, i, 3):
        s -= 1
    for k in range(i, 0, -2):
        s += 10
    out[i, 8] = s
    n = 0
    m = i
    while True:
        m -= 1
        if m % 2 == 0:
            continue
        n += 1
        if m < 0:
            break
    out[i, 9] = n
    out[i, 10] = math.sqrt(abs(x)) + math.exp(-x * x) + math.log(1.0 + abs(x)) + math.sin(x) * math.cos(x)
    out[i, 11] = math.tanh(x) + math.fabs(x) + math.floor(x) + math.ceil(x) + math.pow(abs(x), 1.5) + math.pi
    out[i, 12] = min(j, 2) + max(x, 0.5, j) + abs(j) + int(x * 3) + float(i) / 3
    y = 1  # an int, then a float: the local is a double throughout
    y = y / 2
    y *= 3
    out[i, 13] = y
    p, q = i, j
    p, q = q, p
    out[i, 14] = p * 100 + q
    out[i, 15] = -j if j < 0 else j * 2
    out[i, 16] = sign(j) + clamp(x, -0.5, 0.5)
    if i == 1:
        return 7  # an early return
    NULL, sqrt, double = 2, 3, 4  # noqa: N806 (names that C++ or its headers use: renamed)
    out[i, 17] = 1.5 + NULL * sqrt * double
    return 0


@strata.jit(device=True)
def sign(v):
    if v < 0:
        return -1
    if v == 0:
        return 0
    return 1


@strata.jit(device=True)
def clamp(v, lo, hi):
    return min(max(v, lo), hi)


@strata.jit
def arith_kernel(xs, out, ret):
    i = strata.grid(1)
    if i >= xs.shape[0]:
        return
    ret[i] = arith(i, xs[i], out)


def test_scalar_constructs_match_python():
    n = 16
    xs = np.linspace(-2.3, 2.9, n)
    out = np.zeros((n, 18))
    ret = np.zeros(n, np.int32)
    arith_kernel[2, 8](xs, out, ret)
    expected = np.zeros((n, 18))
    expected_ret = [arith.py_func(i, float(xs[i]), expected) for i in range(n)]
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    assert list(ret) == expected_ret
    source = arith_kernel.inspect_source(("f64[:]", "f64[:, :]", "i32[:]"))
    assert "pyj_floordiv" in source and f'#line {line_of(arith.py_func, "j // 3")} "{HERE}"' in source


@strata.jit
def block_stats(x, total, count, hi, lo):
    """A block sum in shared memory with barriers, then atomics on f32, i64 and i32 arrays."""
    part = strata.shared.array(TPB, strata.float32)
    tid = strata.threadIdx.x
    i = strata.blockIdx.x * strata.blockDim.x + tid
    part[tid] = x[i] if i < x.size else 0
    strata.syncthreads()
    s = strata.blockDim.x // 2
    while s > 0:
        if tid < s:
            part[tid] += part[tid + s]
        strata.syncthreads()
        s //= 2
    if tid == 0:
        strata.atomic.add(total, 0, part[0])
    if i < x.size:
        strata.atomic.add(count, 0, 1)
        strata.atomic.max(hi, 0, x[i])
        strata.atomic.min(lo, (0, 0), int(x[i]))
        return  # a return after a barrier: co_return on the CPU


@strata.jit
def dynamic_reverse(a, out):
    buf = strata.shared.array(0, np.float64)  # sized by the launch's third item
    t = strata.threadIdx.x
    buf[t] = a[t]
    pair = strata.local.array((1, 2), strata.int64)  # one per thread
    pair[0, 0] = t
    pair[0, 1] = strata.blockDim.x - 1 - t
    strata.syncthreads()
    out[pair[0, 0]] = buf[pair[0, 1]]


def test_shared_memory_barriers_and_atomics():
    x = np.arange(100, dtype=np.float32) - 40
    total, count = np.zeros(1, np.float32), np.zeros(1, np.int64)
    hi, lo = np.full(1, -1e9, np.float32), np.full((1, 1), 10**9, np.int32)
    block_stats[(100 + TPB - 1) // TPB, TPB](x, total, count, hi, lo)
    assert total[0] == x.sum() and count[0] == 100 and hi[0] == 59 and lo[0, 0] == -40

    a = strata.arange(64, dtype=strata.float64)
    out = strata.empty(64, dtype=strata.float64)
    dynamic_reverse[1, 64, 64 * 8](a, out)
    assert out.tolist() == list(range(63, -1, -1))


def test_compiled_once_per_signature_and_the_disk_cache_serves_a_second_process(own_cache):
    a = np.zeros(10, np.float32)
    increment_by_one.forall(10)(a)
    sources = increment_by_one.inspect_source()
    increment_by_one.forall(10)(np.zeros(5, np.float32))  # same signature: nothing new
    assert increment_by_one.inspect_source() == sources
    increment_by_one.forall(10)(np.zeros(5, np.int32))
    assert len(increment_by_one.inspect_source()) == len(sources) + 1
    assert (("i32[:]",), "cpu") in increment_by_one.inspect_source()
    text = increment_by_one.inspect_source((np.zeros(3, np.float64),))  # a signature from arguments
    assert "double* an_array" in text and "long long an_array_shape0" in text

    script = own_cache.parent / "second.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, strata

        @strata.jit
        def scale(a, f):
            i = strata.grid(1)
            if i < a.size:
                a[i] *= f

        a = np.ones(8, np.float32)
        scale.forall(8)(a, 2.5)
        assert (a == 2.5).all()
        print(strata.kernels.cache_stats()["misses"])
    """))
    runs = [subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                           env={**os.environ}) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    assert [r.stdout.strip() for r in runs] == ["1", "0"]

    # cache=False: compiled in both processes, nothing added to the disk cache.
    entries = sorted(os.listdir(own_cache))
    script.write_text(script.read_text().replace("@strata.jit", "@strata.jit(cache=False)"))
    runs = [subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                           env={**os.environ}) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    assert [r.stdout.strip() for r in runs] == ["1", "1"]
    assert sorted(os.listdir(own_cache)) == entries


@strata.jit
def out_of_bounds(a, k):
    i = strata.grid(1)
    a[i + k] = 1.0


@strata.jit
def reads_out_of_bounds(a, c, k):
    i = strata.grid(1)
    if i < c.size:
        c[i] = a[i + k] + 1


@strata.jit
def out_of_bounds_2d(c, k):
    i, j = strata.grid(2)
    c[i, j + k] = 1


@strata.jit
def out_of_bounds_in_a_loop(a, k):
    i = strata.grid(1)
    for m in range(2):
        a[i + k * m] += 1.0


@strata.jit
def checked(a):
    i = strata.grid(1)
    assert a[i] >= 0


def test_a_bad_index_and_a_failed_assert_name_the_python_line():
    a = np.zeros(8, np.float32)
    out_of_bounds[1, 8](a, 0)
    line = line_of(out_of_bounds.py_func, "a[i + k] = 1.0")
    # Thread 5 is the first with i + 3 >= 8.
    with pytest.raises(strata.DeviceAssertError,
                       match=rf"{HERE}:{line}.*a\[i \+ k\]: index out of bounds.* thread \(5, 0, 0\)"):
        out_of_bounds[1, 8](a, 3)
    with pytest.raises(strata.DeviceAssertError, match=rf"{HERE}:{line}.* thread \(0, 0, 0\)"):
        out_of_bounds[1, 8](a, -1)  # no wrap-around: negative indices are out of bounds
    b = np.ones(4)
    checked[1, 4](b)
    b[2] = -1
    with pytest.raises(strata.DeviceAssertError, match=rf"{HERE}:{line_of(checked.py_func, 'assert a[i]')}"):
        checked[1, 4](b)


def test_a_bad_index_never_touches_memory_outside_the_array():
    # A kernel without loops checks its indices without ending the thread (Note [Checked indices that vectorise]):
    # the bad accesses are skipped, the launch raises, and the memory around the array is as it was.
    buffer = np.full(24, 7.0, np.float32)
    a = buffer[8:16]
    with pytest.raises(strata.DeviceAssertError, match=r"a\[i \+ k\]: index out of bounds.* thread \(5, 0, 0\)"):
        out_of_bounds[1, 8](a, 3)
    assert (buffer[:8] == 7).all() and (buffer[16:] == 7).all()
    assert (a[3:] == 1).all()  # the threads in bounds wrote
    with pytest.raises(strata.DeviceAssertError, match=r" thread \(0, 0, 0\)"):
        out_of_bounds[1, 8](buffer[8:16], -4)
    assert (buffer[:8] == 7).all()

    source = np.arange(8, dtype=np.float32)
    c = np.zeros(8, np.float32)
    line = line_of(reads_out_of_bounds.py_func, "c[i] = a[i + k] + 1")
    with pytest.raises(strata.DeviceAssertError, match=rf"{HERE}:{line}.*a\[i \+ k\]: index out of bounds"):
        reads_out_of_bounds[1, 8](source, c, 2)
    np.testing.assert_array_equal(c[:6], source[2:] + 1)

    # An index past its own dimension is refused even where the flat offset falls inside the array.
    grid = np.zeros((4, 4), np.int32)
    with pytest.raises(strata.DeviceAssertError, match=r"c\[i, j \+ k\]: index out of bounds.* thread \(0, 3, 0\)"):
        out_of_bounds_2d[(1, 1), (4, 4)](grid, 1)
    assert grid[:, 1:].sum() == 12 and grid[:, 0].sum() == 0

    # A kernel with a loop ends the thread at the assert, on the first iteration that fails.
    looped = np.zeros(8, np.float32)
    line = line_of(out_of_bounds_in_a_loop.py_func, "a[i + k * m] += 1.0")
    with pytest.raises(strata.DeviceAssertError, match=rf"{HERE}:{line}.*index 0 out of bounds"):
        out_of_bounds_in_a_loop[1, 8](looped, 4)
    assert "STRATA_CHECK_SITES" not in out_of_bounds_in_a_loop.inspect_source(("f32[:]", "i64"))
    assert "STRATA_CHECK_SITES" in out_of_bounds.inspect_source(("f32[:]", "i64"))
    # On a GPU every index is an assert.
    assert "STRATA_CHECK_SITES" not in out_of_bounds.inspect_source(("f32[:]", "i64"), device="cuda")


@strata.jit
def shifts_through_shared_memory(a, out):
    s = strata.shared.array(8, strata.float32)
    t = strata.threadIdx.x
    s[t] = a[t]
    strata.syncthreads()
    out[t] = s[t + 1]


def test_a_bad_index_in_a_kernel_with_a_barrier_is_checked_the_same_way():
    # Its threads are coroutines on the CPU; the block's first failing thread is found as in a loop.
    a, out = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    line = line_of(shifts_through_shared_memory.py_func, "out[t] = s[t + 1]")
    with pytest.raises(strata.DeviceAssertError,
                       match=rf"{HERE}:{line}.*s\[t \+ 1\]: index out of bounds.* thread \(7, 0, 0\)"):
        shifts_through_shared_memory[1, 8](a, out)
    np.testing.assert_array_equal(out[:7], a[1:])
    assert out[7] == 0


@strata.jit
def claims_slots(counter, out):
    i = strata.grid(1)
    if i < out.size:
        out[strata.atomic.add(counter, 0, 1)] = i + 1


@strata.jit
def counts_in_a_chained_comparison(counter, hits):
    i = strata.grid(1)
    if 0 <= strata.atomic.add(counter, 0, 1) < hits.size:
        hits[i] = 1


def test_an_index_or_comparison_with_an_atomic_evaluates_it_once():
    counter = np.zeros(1, np.int64)
    out = np.zeros(8, np.int64)
    claims_slots[1, 8](counter, out)
    assert counter[0] == 8
    assert sorted(out) == list(range(1, 9))
    counter[0] = 0
    hits = np.zeros(8, np.int64)
    counts_in_a_chained_comparison[1, 8](counter, hits)
    assert counter[0] == 8 and hits.sum() == 8
    for device in ("cuda", "hip"):  # the GPU source evaluates it once too (the compile test compiles such source)
        assert claims_slots.inspect_source(("i64[:]", "i64[:]"), device=device).count("atomicAdd") == 1


def compile_error(fn, args, construct):
    kernel = strata.jit(fn)
    with pytest.raises(strata.CompileError) as e:
        kernel[1, 1](*args)
    message = str(e.value)
    assert construct in message, message
    return message


def test_unsupported_constructs_name_the_construct_file_and_line():
    def lists(a):
        b = [1, 2]  # line 1 of the body
        a[0] = b[0]

    def slices(a):
        a[1:] = 0

    def calls_print(a):
        print(a[0])

    def wrong_rank(a):
        a[0] = 1

    def undefined(a):
        a[0] = nowhere  # noqa: F821

    def tries(a):
        try:
            a[0] = 1
        except Exception:
            pass

    def syncs_in_device(a):
        helper_with_barrier(a)

    cases = [(lists, "b = [1, 2]", "'[1, 2]' (List)"), (slices, "a[1:] = 0", "slicing"), (calls_print, "print(a[0])", "print"),
             (wrong_rank, "a[0] = 1", "1 indices for the 2-D array 'a'"), (undefined, "nowhere", "'nowhere'"),
             (tries, "try:", "(Try)"), (syncs_in_device, "strata.syncthreads()", "device function")]
    for fn, text, construct in cases:
        arg = np.zeros((2, 2)) if fn is wrong_rank else np.zeros(2)
        message = compile_error(fn, (arg,), construct)
        holder = helper_with_barrier.py_func if fn is syncs_in_device else fn
        assert f"{HERE}:{line_of(holder, text)}:" in message, message


@strata.jit(device=True)
def helper_with_barrier(a):
    strata.syncthreads()


@strata.jit(device=True)
def calls_nothing_known(x):
    return x + undefined_function(x)  # noqa: F821


@strata.jit
def calls_a_broken_device_function(a):
    a[0] = calls_nothing_known(a[0])


def test_launch_errors():
    line = line_of(calls_nothing_known.py_func, "undefined_function(x)")
    with pytest.raises(strata.CompileError, match=rf"{HERE}:{line}: calling undefined_function"):
        calls_a_broken_device_function[1, 1](np.zeros(1))
    with pytest.raises(TypeError, match=r"increment_by_one\[blocks, threads\]"):
        increment_by_one(np.zeros(3))
    with pytest.raises(strata.TypeError, match="argument 0 is a str"):
        increment_by_one[1, 1]("no")
    with pytest.raises(strata.CompileError, match="takes 1 arguments; got 2"):
        increment_by_one[1, 1](np.zeros(3), 1)
    assert sign(-3) == -1 and clamp(2.0, 0.0, 1.0) == 1.0  # device functions called from Python run as Python


def test_tensors_on_two_devices_are_refused(tmp_path):
    script = tmp_path / "two_devices.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, strata

        @strata.jit
        def copy(a, b):
            a[0] = b[0]

        for b in (strata.zeros(2), np.zeros(2, np.float32)):
            try:
                copy[1, 1](strata.zeros(2, device="cpu:1"), b)
            except strata.InvalidArgumentError as e:
                print(e)
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                            env={**os.environ, "STRATA_CPU_DEVICES": "2"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("its tensors are on different devices (cpu, cpu:1)") == 2, result.stdout


def test_the_generated_source_compiles_for_nvidia_and_amd_gpus():
    # No GPU is needed to compile (NVRTC, hiprtc); a build without the GPU plugins skips.
    for target in ("cuda:sm_90", "hip:gfx90a"):
        for kernel, signature in ((arith_kernel, ("f64[:]", "f64[:, :]", "i32[:]")),
                                  (block_stats, ("f32[:]", "f32[:]", "i64[:]", "f32[:]", "i32[:, :]")),
                                  (claims_slots, ("i64[:]", "i64[:]")),
                                  (counts_in_a_chained_comparison, ("i64[:]", "i64[:]"))):
            source = kernel.inspect_source(signature, device=target.split(":")[0])
            try:
                binary = strata.kernels.compile(source, target)
            except strata.DeviceUnavailableError as e:
                pytest.skip(str(e))
            assert len(binary) > 1000


def test_the_numba_article_tutorial_runs():
    path = os.path.join(os.path.dirname(HERE), "..", "tutorials", "numba_article.py")
    result = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300, env={**os.environ})
    assert result.returncode == 0, result.stderr
    for name in ("increment_by_one 1-D", "increment_by_one 2-D", "vector add", "tiled matmul"):
        assert f"{name}: matches NumPy" in result.stdout, result.stdout
