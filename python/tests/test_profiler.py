"""strata.profiler.profile(), STRATA_PROFILE and strata-train --profile: the recording, its Chrome trace read back
with json, and the table of top ops (Note [The profiler])."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import strata
import strata.profiler

BUILD = Path(strata.__file__).resolve().parents[2]  # <build>/python/strata/__init__.py


def _trace_events(path):
    with open(path) as f:
        trace = json.load(f)
    return trace["traceEvents"]


def test_profile_records_ops_with_shapes(tmp_path):
    a = strata.ones(2, 3)
    b = strata.ones(2, 3)
    with strata.profiler.profile() as prof:
        with strata.profiler.record_function("step"):
            c = a + b
            d = c * 2.0
    assert d.shape == (2, 3)
    events = prof.events()
    ops = [e for e in events if e["kind"] == "op"]
    added = next(e for e in ops if e["name"] == "add")
    assert added["device"] == "cpu"
    assert added["shapes"][:2] == [[2, 3], [2, 3]]
    assert added["duration_ns"] > 0
    assert [e["name"] for e in events if e["kind"] == "range"] == ["step"]
    assert not strata._C._profiler_enabled()

    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    trace = _trace_events(path)
    complete = [e for e in trace if e["ph"] == "X"]
    assert {"add", "step"} <= {e["name"] for e in complete}
    for e in complete:
        assert {"ts", "dur", "pid", "tid", "args", "cat"} <= set(e)
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in trace)
    assert prof.chrome_trace()["traceEvents"] == trace


def test_key_averages_table():
    a = strata.ones(64)
    with strata.profiler.profile() as prof:
        for _ in range(4):
            a + a
        a * a
    averages = prof.key_averages()
    by_key = {row.key: row for row in averages}
    assert by_key["add"].count == 4
    assert by_key["mul"].count == 1
    assert by_key["add"].cpu_time_total > 0
    table = averages.table(sort_by="count", row_limit=1)
    header = table.splitlines()[1]
    for column in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"):
        assert column in header
    assert "add" in table and "mul" not in table
    assert "Self CPU time total:" in table
    assert "mul" in averages.table(sort_by="cpu_time_total", row_limit=10)
    with pytest.raises(strata.InvalidArgumentError, match="sort_by='wall'"):
        averages.table(sort_by="wall")


def test_nothing_recorded_outside_and_no_nesting():
    a = strata.ones(4)
    a + a
    with strata.profiler.profile() as prof:
        with pytest.raises(strata.InvalidArgumentError, match="already running"):
            strata.profiler.profile().start()
    assert prof.events() == []
    with pytest.raises(OSError, match="/no-such-dir/t.json"):
        prof.export_chrome_trace("/no-such-dir/t.json")


def _run_python(code, env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def test_strata_profile_environment_variable(tmp_path):
    path = tmp_path / "whole.json"
    run = _run_python("""
        import strata
        a = strata.ones(3, 5)
        (a + a).sum()
        """, {"STRATA_PROFILE": str(path)})
    assert run.returncode == 0, run.stderr
    assert "wrote" in run.stderr and str(path) in run.stderr
    names = {e["name"] for e in _trace_events(path) if e["ph"] == "X"}
    assert "add" in names


def test_strata_profile_unwritable_is_refused_at_startup(tmp_path):
    bad = tmp_path / "missing" / "trace.json"
    run = _run_python("import strata; print('ran')", {"STRATA_PROFILE": str(bad)})
    assert run.returncode == 2
    assert f"STRATA_PROFILE='{bad}' is refused" in run.stderr
    assert "ran" not in run.stdout


def _strata_train():
    tool = BUILD / "bin" / "strata-train"
    if not tool.exists():
        pytest.skip(f"{tool} is not built")
    return str(tool)


def test_strata_train_profile(tmp_path):
    path = tmp_path / "train.json"
    run = subprocess.run([_strata_train(), "--device", "cpu", "--epochs", "1", "--train-images", "128",
                          "--test-images", "64", "--batch-size", "64", "--profile", str(path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert f"written to {path}" in run.stderr
    assert "# of Calls" in run.stderr
    trace = _trace_events(path)
    ops = {e["name"] for e in trace if e["ph"] == "X" and e["cat"] == "op"}
    assert "conv2d" in ops and len(ops) >= 5, sorted(ops)
    allocator = [e for e in trace if e["ph"] == "i" and e["cat"] == "allocator"]
    assert allocator and all(e["args"]["bytes"] > 0 for e in allocator if e["name"] == "segment_alloc")
    # Each training step is a named range holding its ops: steps 1 and 2 of the 128 images in batches of 64.
    steps = sorted((e for e in trace if e["ph"] == "X" and e["name"].startswith("step ")), key=lambda e: e["ts"])
    assert [e["name"] for e in steps] == ["step 1", "step 2"], [e["name"] for e in steps]
    first = steps[0]
    inside = [e for e in trace if e["ph"] == "X" and e["cat"] == "op" and e["tid"] == first["tid"]
              and first["ts"] <= e["ts"] and e["ts"] + e["dur"] <= first["ts"] + first["dur"]]
    assert {"conv2d", "cross_entropy"} <= {e["name"] for e in inside}, sorted({e["name"] for e in inside})


def test_strata_train_shakespeare_profile_has_its_steps(tmp_path):
    path = tmp_path / "gpt.json"
    excerpt = Path(__file__).resolve().parents[2] / "tests" / "data" / "shakespeare-excerpt.txt"
    run = subprocess.run([_strata_train(), "--task", "shakespeare", "--device", "cpu", "--data", str(excerpt),
                          "--iters", "3", "--eval-interval", "3", "--eval-iters", "1", "--profile", str(path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    trace = _trace_events(path)
    assert [e["name"] for e in trace if e["ph"] == "X" and e["name"].startswith("step ")] == ["step 1", "step 2",
                                                                                             "step 3"]
    ops = {e["name"] for e in trace if e["ph"] == "X" and e["cat"] == "op"}
    assert {"scaled_dot_product_attention", "scaled_dot_product_attention_backward", "embedding"} <= ops, sorted(ops)


def test_strata_train_refuses_an_unwritable_profile_before_training(tmp_path):
    bad = tmp_path / "missing" / "train.json"
    run = subprocess.run([_strata_train(), "--device", "cpu", "--epochs", "1", "--profile", str(bad),
                          "--data", str(tmp_path / "no-data")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stderr.startswith(f"strata-train: error: cannot write the profiler trace to '{bad}'"), run.stderr
    assert "no-data" not in run.stderr  # refused before the data is read
