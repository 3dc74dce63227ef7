"""strata.RawKernel: CUDA-dialect kernels compiled at run time, called as CuPy's, here on the CPU."""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import strata

ADD = r'''
extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}'''


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_KERNEL_CACHE", str(tmp_path / "kernels"))
    return tmp_path / "kernels"


# A process that compiles (or loads) ADD, runs it and prints the cache's counters.
ADD_PROCESS = f"""
import strata
add = strata.RawKernel({ADD!r}, "add")
a = strata.ones(64); c = strata.empty(64)
add((1,), (64,), (a, a, c, 64))
assert c.eq(2).all().item()
print(strata.kernels.cache_stats())
"""


def run_python(code, env):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=240, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_vector_add_on_tensors_and_numpy_arrays():
    add = strata.RawKernel(ADD, "add")
    n = 10001
    a, b = strata.randn(n), strata.randn(n)
    c = strata.empty(n)
    add(((n + 255) // 256,), (256,), (a, b, c, n))
    assert strata.equal(c, a + b)
    x = np.arange(n, dtype=np.float32)
    y = np.empty(n, dtype=np.float32)
    add((n + 127) // 128, 128, (x, x, y, np.int32(n)))  # ints for grid and block, a NumPy scalar
    np.testing.assert_array_equal(y, 2 * x)
    assert add.name == "add" and [p[0] for p in add.params] == ["a", "b", "c", "n"]


def test_shared_memory_barrier_and_atomics():
    reduce = strata.RawKernel(r'''
    extern "C" __global__ void block_sum(const float* x, float* total, int n) {
        extern __shared__ float partial[];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        partial[threadIdx.x] = i < n ? x[i] : 0.0f;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
            __syncthreads();
        }
        if (threadIdx.x == 0) atomicAdd(total, partial[0]);
    }''', "block_sum")
    n = 4096
    x = strata.ones(n)
    total = strata.zeros(1)
    reduce((n // 128,), (128,), (x, total, n), shared_mem=128 * 4)
    assert total.item() == n


def test_errors_name_what_was_wrong():
    add = strata.RawKernel(ADD, "add")
    a, c = strata.ones(4), strata.empty(4)
    with pytest.raises(strata.InvalidArgumentError, match=r"add\(const float\* a, .*int n\) takes 4 arguments; got 3"):
        add((1,), (4,), (a, a, c))
    with pytest.raises(strata.DTypeError, match="argument 1 .* points to f32; the tensor holds f64"):
        add((1,), (4,), (a, a.double(), c, 4))
    with pytest.raises(strata.TypeError, match="argument 3 is a str"):
        add((1,), (4,), (a, a, c, "4"))
    with pytest.raises(strata.InvalidArgumentError, match="grid"):
        add((0,), (4,), (a, a, c, 4))
    with pytest.raises(strata.InvalidArgumentError, match="at most 1024 threads"):
        add((1,), (32, 64), (a, a, c, 4))
    with pytest.raises(strata.TypeError, match="tuple of 1 to 3 ints"):
        add((1, 1, 1, 1), (4,), (a, a, c, 4))
    with pytest.raises(strata.InvalidArgumentError, match="it defines: add"):
        strata.RawKernel(ADD, "sub")
    readonly = np.ones(4, np.float32)
    readonly.flags.writeable = False
    with pytest.raises(strata.InvalidArgumentError, match="read-only"):
        add((1,), (4,), (a, a, readonly, 4))
    add((1,), (4,), (readonly, readonly, c, 4))  # read through const pointers: fine


def test_a_compile_error_has_the_line_and_a_failed_assert_the_condition():
    broken = strata.RawKernel('extern "C" __global__ void k(float* x) {\n  x[0] = nope;\n}', "k")
    with pytest.raises(strata.CompileError, match=r"k\.cu:2:.*nope"):
        broken((1,), (1,), (strata.zeros(1),))
    checked = strata.RawKernel(r'''extern "C" __global__ void k(const int* idx, int n) {
    assert(idx[threadIdx.x] < n);
}''', "k")
    idx = strata.arange(8, dtype=strata.int32)
    checked((1,), (8,), (idx, 8))
    with pytest.raises(strata.DeviceAssertError, match=r"k\.cu:2.*idx\[threadIdx.x\] < n"):
        checked((1,), (8,), (idx, 3))


def test_two_threads_launch_one_kernel_compiled_once():
    add = strata.RawKernel(ADD, "add")
    before = strata.kernels.cache_stats()
    a = strata.ones(1000)
    outs = [strata.empty(1000) for _ in range(2)]
    errors = []

    def launch(c):
        try:
            for _ in range(20):
                add((4,), (256,), (a, a, c, 1000))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=launch, args=(c,)) for c in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(c.eq(2).all().item() for c in outs)
    after = strata.kernels.cache_stats()
    assert after["misses"] - before["misses"] == 1


def test_four_processes_compiling_at_once_compile_once(own_cache):
    procs = [subprocess.Popen([sys.executable, "-c", ADD_PROCESS], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ}) for _ in range(4)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert sum(eval(o[0])["misses"] for o in outs) == 1  # one process compiled; three waited on its flock and loaded
    assert len([f for f in os.listdir(own_cache) if f.endswith(".so")]) == 1
    assert not [f for f in os.listdir(own_cache) if f.startswith(".tmp")]


def test_a_corrupt_entry_is_removed_and_rebuilt_in_the_next_process(own_cache):
    first = run_python(ADD_PROCESS, {})
    assert "'misses': 1" in first
    (entry,) = [f for f in os.listdir(own_cache) if f.endswith(".so")]
    with open(own_cache / entry, "r+b") as f:
        f.truncate(100)
    second = run_python(ADD_PROCESS, {})
    assert "'discarded': 1" in second and "'misses': 1" in second
    third = run_python(ADD_PROCESS, {})
    assert "'hits': 1" in third and "'misses': 0" in third


def test_an_unwritable_cache_warns_once_and_compiles(monkeypatch):
    code = ADD_PROCESS + ADD_PROCESS + 'print(strata.kernels.cache_folder() == "")\n'  # two kernels: one warning
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=240, env={**os.environ, "STRATA_KERNEL_CACHE": "/proc/strata/no"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("True")
    assert result.stderr.count("kernel cache is not used") == 1


def test_a_kernel_with_cache_false_leaves_nothing_on_disk(own_cache):
    add = strata.RawKernel(ADD, "add", cache=False)
    a, c = strata.ones(4), strata.empty(4)
    add((1,), (4,), (a, a, c, 4))
    assert c.eq(2).all().item()
    assert not own_cache.exists() or not os.listdir(own_cache)


def test_compile_for_a_named_target_without_a_device():
    binary = strata.kernels.compile(ADD, "cpu")
    assert binary[:4] == b"\x7fELF"
    with pytest.raises(strata.InvalidArgumentError, match="cuda:sm_XY"):
        strata.kernels.compile(ADD, "cuda")


def test_a_missing_compiler_says_how_to_get_one(monkeypatch):
    monkeypatch.setenv("STRATA_JIT_CXX", "/nonexistent/c++")
    add = strata.RawKernel(ADD, "add")
    a = strata.ones(4)
    with pytest.raises(strata.CompileError, match="install g\\+\\+, or set STRATA_JIT_CXX"):
        add((1,), (4,), (a, a, strata.empty(4), 4))


def test_too_much_shared_memory_and_tensors_on_two_devices_are_refused():
    add = strata.RawKernel(ADD, "add")
    a, c = strata.ones(4), strata.empty(4)
    with pytest.raises(strata.InvalidArgumentError, match="dynamic shared memory; the CPU allows at most"):
        add((1,), (4,), (a, a, c, 4), shared_mem=1 << 30)
    out = run_python(f"""
        import strata
        add = strata.RawKernel({ADD!r}, "add")
        a = strata.ones(4, device="cpu:0"); b = strata.ones(4, device="cpu:1"); c = strata.empty(4)
        try:
            add((1,), (4,), (a, b, c, 4))
        except strata.DeviceMismatchError as e:
            print("refused:", e)
    """, {"STRATA_CPU_DEVICES": "2"})
    assert "refused: argument 1 (const float* b) of kernel 'add' is on cpu:1, but argument 0 is on cpu" in out
