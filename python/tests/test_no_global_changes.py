"""Strata changes nothing of the process it did not ask for: `import strata` writes no environment variable, and
strata-train and strata-bench run once, without executing themselves again with a variable of their own
(Note [How long OpenMP spins] in strata/runtime/parallel.cpp)."""
import os
import pathlib
import subprocess
import sys

import pytest

import strata

# Where the build's tools are: build/<preset>/bin beside build/<preset>/python/strata.
BIN = pathlib.Path(strata.__file__).resolve().parents[2] / "bin"
FASHION_MNIST = pathlib.Path("/usr/share/datasets/fashion-mnist")
MARKER = "STRATA_TEST_ENVIRONMENT_MARKER"


def clean_environment():
    """This process's environment without the variables a restart would set, and with a marker whose presence in a
    child's /proc/PID/environ shows that the file was read."""
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env[MARKER] = "present"
    return env


def test_import_strata_leaves_the_environment_as_it_was():
    script = """
import ctypes, os
before = dict(os.environ)
import strata
import strata.nn
(strata.ones(64, 64) @ strata.ones(64, 64)).sum().item()   # oneDNN and the thread pool both loaded and used
assert dict(os.environ) == before, set(os.environ.items()) ^ set(before.items())
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
assert libc.getenv(b"GOMP_SPINCOUNT") is None, libc.getenv(b"GOMP_SPINCOUNT")
print("unchanged")
"""
    out = subprocess.run([sys.executable, "-c", script], env=clean_environment(), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "unchanged"


def environment_of(pid):
    text = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode(errors="replace").split("=", 1) for entry in text if b"=" in entry)


def expect_no_restart(args, stream):
    """Starts a tool, waits for its first line on `stream` (printed after main began, hence after a restart would have
    happened), and reads the running process's environment: an exec with GOMP_SPINCOUNT set would show there."""
    if not (BIN / args[0]).exists():
        pytest.skip(f"{args[0]} is not built beside this Python module ({BIN})")
    proc = subprocess.Popen([str(BIN / args[0])] + args[1:], env=clean_environment(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = (proc.stdout if stream == "stdout" else proc.stderr).readline()
        env = environment_of(proc.pid)
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert first.startswith(args[0] + ": "), first
    assert env.get(MARKER) == "present", "the tool's environment was not read"
    assert "GOMP_SPINCOUNT" not in env, "the tool executed itself again with GOMP_SPINCOUNT set"


def test_strata_train_does_not_restart_itself():
    if not FASHION_MNIST.is_dir():
        pytest.skip("Fashion-MNIST is not installed (Debian's dataset-fashion-mnist)")
    expect_no_restart(["strata-train", "--device", "cpu", "--epochs", "1", "--train-images", "2048"], "stdout")


def test_strata_bench_does_not_restart_itself():
    expect_no_restart(["strata-bench", "--only", "d2l", "--quick"], "stderr")
