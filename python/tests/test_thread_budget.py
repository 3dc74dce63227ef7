"""STRATA_THREAD_BUDGET, the switch that keeps CPU work at the pool's size whatever the machine's load (README's table
of variables; Note [Fewer threads while other processes hold the cores]): checked with the runtime's other variables
at the first CPU allocation, in a fresh process each, since it is read once."""
import os
import subprocess
import sys

import pytest

PROGRAM = "import strata; print((strata.ones(256, 256) @ strata.ones(256, 256)).sum().item())"


def run(value):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    env["STRATA_THREAD_BUDGET"] = value
    return subprocess.run([sys.executable, "-c", PROGRAM], env=env, timeout=120, capture_output=True, text=True)


@pytest.mark.parametrize("value", ["off", "OFF", "0", "on", "1", ""])
def test_a_switch_value_runs(value):
    result = run(value)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(256.0 ** 3)


@pytest.mark.parametrize("value", ["sometimes", "2", "auto"])
def test_another_value_is_an_error_naming_the_variable_and_the_switch_values(value):
    result = run(value)
    assert result.returncode != 0
    assert f"STRATA_THREAD_BUDGET='{value}'" in result.stderr, result.stderr
    assert "1, true, yes, on, 0, false, no, off" in result.stderr
    assert "strata.InvalidArgumentError" in result.stderr
