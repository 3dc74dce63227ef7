"""STRATA_* environment variables: one rule for all (Note [Strata's environment variables] in
strata/runtime/environment.h). Each case runs in a fresh process, since the variables are read once."""
import os
import subprocess
import sys

import pytest

PROGRAM = "import strata; print(strata.ones(2).sum().item())"


def run(**variables):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    env.update(variables)
    return subprocess.run([sys.executable, "-c", PROGRAM], env=env, timeout=120, capture_output=True, text=True)


@pytest.mark.parametrize("variable, value, accepted", [
    ("STRATA_SYNC_DEBUG", "bogus", "off, 0, warn, 1, error, 2"),
    ("STRATA_LAUNCH_BLOCKING", "bogus", "1, true, yes, on, 0, false, no, off"),
    ("STRATA_MEMORY_LIMIT", ",", "DEVICE=SIZE"),
    ("STRATA_CPU_DEVICES", "two", "from 1 to 64"),
])
def test_a_bad_value_is_an_error_naming_the_variable_its_value_and_what_it_accepts(variable, value, accepted):
    result = run(**{variable: value})
    assert result.returncode != 0
    assert f"{variable}='{value}'" in result.stderr and accepted in result.stderr, result.stderr
    assert "strata.InvalidArgumentError" in result.stderr


def test_a_memory_limit_for_a_cpu_device_that_does_not_exist_is_an_error():
    result = run(STRATA_MEMORY_LIMIT="cpu:3=1GiB")
    assert result.returncode != 0
    assert "limits cpu:3, which does not exist: there is 1 cpu device(s)" in result.stderr, result.stderr
    assert "STRATA_CPU_DEVICES" in result.stderr


@pytest.mark.parametrize("variable, value", [
    ("STRATA_SYNC_DEBUG", "ERROR"),  # keywords ignore case
    ("STRATA_SYNC_DEBUG", "Warn"),
    ("STRATA_SYNC_DEBUG", "1"),
    ("STRATA_LAUNCH_BLOCKING", "TRUE"),
    ("STRATA_LAUNCH_BLOCKING", "0"),
    ("STRATA_MEMORY_LIMIT", "cpu:1=1GiB,"),
    ("STRATA_CPU_DEVICES", ""),  # empty counts as unset, for every variable
    ("STRATA_SYNC_DEBUG", ""),
    ("STRATA_MEMORY_LIMIT", ""),
])
def test_accepted_values_run(variable, value):
    extra = {"STRATA_CPU_DEVICES": "2"} if value == "cpu:1=1GiB," else {}
    result = run(**{variable: value}, **extra)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2.0"
