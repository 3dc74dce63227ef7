"""`import torch` before `import strata` (issue 35): libstrata must not need static TLS that a library PyTorch
loaded first can no longer give (tests/tls_check.cmake checks the cause in every build). Runs where PyTorch is
installed: make test's set-up installs Debian's 1.13 (scripts/install-deps), the benchmarks' environments PyTorch
2.15 from PyPI (bench/compare-pytorch-python/run --torch pypi)."""
import importlib.util
import os
import subprocess
import sys

import pytest


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed for this interpreter")
def test_strata_imports_after_torch():
    code = "import torch, strata; print((strata.ones(2) + 1).tolist())"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == "[2.0, 2.0]"
