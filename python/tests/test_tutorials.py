"""The tutorial scripts of python/tutorials run to the end, on the CPU when there is no GPU."""
import os
import pathlib
import subprocess
import sys

import pytest

TUTORIALS = pathlib.Path(__file__).resolve().parent.parent / "tutorials"


def run(script, **env):
    result = subprocess.run([sys.executable, str(TUTORIALS / script)], capture_output=True, text=True, timeout=300,
                            env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_vector_add():
    out = run("vector_add.py")
    assert "cpu     c = a + b on 10000000 floats" in out and "c[0] = 3.0" in out


@pytest.mark.parametrize("cpu_devices", ["1", "2"])
def test_d2l_gpu_chapter(cpu_devices):
    out = run("d2l_gpu.py", STRATA_CPU_DEVICES=cpu_devices)
    assert "net(X) =" in out and "Z shares storage with X: False" in out
    assert ("Two devices (" in out) == (cpu_devices == "2")
