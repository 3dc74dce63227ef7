"""strata.utils.tensorboard.SummaryWriter and strata-train --logdir, read back by TensorBoard's own reader.

TensorBoard is not a Debian package: the `tensorboard_reader` fixture installs it from PyPI once, into a virtual
environment in the build tree (<build>/tensorboard-venv, with --system-site-packages so that Debian's NumPy serves),
and the files are read there, in a subprocess, by EventAccumulator. Only when PyPI cannot be reached are these tests
skipped, saying so.
"""
import fcntl
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import strata
from strata.utils.tensorboard import SummaryWriter

TENSORBOARD_REQUIREMENT = "tensorboard==2.21.*"
BUILD = Path(strata.__file__).resolve().parents[2]  # <build>/python/strata/__init__.py
IN_BUILD_TREE = (BUILD / "CMakeCache.txt").exists()
# pip's words when the index cannot be reached (no network, no name resolution, a proxy refusing).
UNREACHABLE = ("NewConnectionError", "Temporary failure in name resolution", "Network is unreachable",
               "ConnectTimeout", "Max retries exceeded", "No matching distribution found",
               "Could not find a version that satisfies")

READER = textwrap.dedent("""
    import json, os, sys
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    root, out = sys.argv[1], {}
    for path, _, files in os.walk(root):
        if not any("tfevents" in f for f in files):
            continue
        acc = EventAccumulator(path, size_guidance={"scalars": 0, "histograms": 0}, purge_orphaned_data=False)
        acc.Reload()
        out[os.path.relpath(path, root)] = {
            "scalars": {t: [[e.step, e.value, e.wall_time] for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]},
            "histograms": {t: [[e.step, {k: getattr(e.histogram_value, k) for k in
                                         ("min", "max", "num", "sum", "sum_squares", "bucket_limit", "bucket")}]
                               for e in acc.Histograms(t)] for t in acc.Tags()["histograms"]},
        }
    print(json.dumps(out))
""")


def _make_venv(venv):
    """Makes `venv` with TensorBoard, or says why not; a file beside it marks it complete."""
    ready = venv / "strata-ready"
    if ready.exists() and ready.read_text() == TENSORBOARD_REQUIREMENT:
        return None
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          TENSORBOARD_REQUIREMENT], capture_output=True, text=True, timeout=600)
    if pip.returncode != 0:
        message = (pip.stdout + pip.stderr).strip()
        if any(words in message for words in UNREACHABLE):
            return f"TensorBoard could not be installed from PyPI, which seems unreachable: {message[-300:]}"
        raise AssertionError(f"pip install {TENSORBOARD_REQUIREMENT} failed:\n{message}")
    ready.write_text(TENSORBOARD_REQUIREMENT)
    return None


@pytest.fixture(scope="session")
def tensorboard_reader(tmp_path_factory):
    """A function reading every run under a directory with TensorBoard's EventAccumulator: {run: {"scalars":
    {tag: [[step, value, wall_time]]}, "histograms": {tag: [[step, {field: value}]]}}}."""
    venv = BUILD / "tensorboard-venv" if IN_BUILD_TREE else tmp_path_factory.mktemp("tb") / "venv"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(str(venv) + ".lock", "w") as lock:  # another pytest of this build tree may be making it
        fcntl.flock(lock, fcntl.LOCK_EX)
        why_not = _make_venv(venv)
    if why_not:
        pytest.skip(why_not)

    def read(root):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        run = subprocess.run([str(venv / "bin" / "python"), "-c", READER, str(root)], capture_output=True, text=True,
                             env=env, timeout=120)
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)

    return read


def _f32(x):
    return float(np.float32(x))


def test_scalars_every_tag_step_and_value(tmp_path, tensorboard_reader):
    values = [("py float", 0.25), ("py int", 3), ("py bool", True), ("0-d tensor", strata.tensor(1.5)),
              ("1-element tensor", strata.tensor([2.5])), ("numpy float32", np.float32(0.1)),
              ("numpy int64", np.int64(7)), ("0-d ndarray", np.array(-4.5)), ("f64 tensor",
                                                                              strata.tensor(1e-7, dtype=strata.float64))]
    with SummaryWriter(tmp_path) as w:
        assert w.get_logdir() == str(tmp_path)
        for step, (_, value) in enumerate(values):
            w.add_scalar("values/mixed", value, step, walltime=1000.0 + step)
        w.add_scalar("loss", 0.5)  # global_step None: step 0, as PyTorch
        w.add_scalar("loss", 0.25, global_step=np.int64(10))
        w.add_scalar("loss", 0.125, global_step=strata.tensor(11))
    runs = tensorboard_reader(tmp_path)
    assert list(runs) == ["."]
    scalars = runs["."]["scalars"]
    assert sorted(scalars) == ["loss", "values/mixed"]
    expected = [float(v.item()) if isinstance(v, strata.Tensor) else float(v) for _, v in values]
    assert [e[0] for e in scalars["values/mixed"]] == list(range(len(values)))
    assert [e[1] for e in scalars["values/mixed"]] == [_f32(v) for v in expected]
    assert [e[2] for e in scalars["values/mixed"]] == [1000.0 + s for s in range(len(values))]
    assert [(e[0], e[1]) for e in scalars["loss"]] == [(0, 0.5), (10, 0.25), (11, 0.125)]
    assert abs(scalars["loss"][0][2] - time.time()) < 60


def test_add_scalars_one_run_per_tag(tmp_path, tensorboard_reader):
    with SummaryWriter(tmp_path) as w:
        for step in range(3):
            w.add_scalars("run/loss", {"train": 1.0 / (step + 1), "test": 2.0 / (step + 1)}, step)
    runs = tensorboard_reader(tmp_path)
    assert sorted(runs) == [".", "run_loss_test", "run_loss_train"]
    assert runs["."]["scalars"] == {}
    for name, scale in (("run_loss_train", 1.0), ("run_loss_test", 2.0)):
        assert list(runs[name]["scalars"]) == ["run/loss"]
        assert [(e[0], e[1]) for e in runs[name]["scalars"]["run/loss"]] == [
            (s, _f32(scale / (s + 1))) for s in range(3)]


def _pytorch_histogram(values, bins):
    """PyTorch's make_histogram (torch/utils/tensorboard/summary.py), with NumPy: what TensorBoard should read."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if bins == "tensorflow":
        v, positive = 1e-12, []
        while v < 1e20:
            positive.append(v)
            v *= 1.1
        bins = [-x for x in reversed(positive)] + [0] + positive
    counts, limits = np.histogram(values, bins=bins)
    cum = np.cumsum(np.greater(counts, 0))
    start, end = np.searchsorted(cum, [0, cum[-1] - 1], side="right")
    start, end = int(start), int(end) + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start:end + 1]
    return dict(min=values.min(), max=values.max(), num=len(values), sum=values.sum(),
                sum_squares=values.dot(values), bucket_limit=limits.tolist(), bucket=counts.astype(float).tolist())


def test_histograms_are_pytorchs(tmp_path, tensorboard_reader):
    rng = np.random.default_rng(0)
    normal = rng.normal(size=1000)
    cases = [("tensor/tf", strata.from_numpy(normal.astype(np.float32)), "tensorflow"),
             ("tensor/30", strata.from_numpy(normal), 30),
             ("numpy/ints", np.arange(10), 5),
             ("numpy/tf", rng.uniform(-3, 100, size=(20, 5)), "tensorflow"),
             ("list/equal", [7.0, 7.0, 7.0], 4)]
    with SummaryWriter(tmp_path) as w:
        for step, (tag, values, bins) in enumerate(cases):
            w.add_histogram(tag, values, step, bins=bins)
    histograms = tensorboard_reader(tmp_path)["."]["histograms"]
    assert sorted(histograms) == sorted(tag for tag, _, _ in cases)
    for step, (tag, values, bins) in enumerate(cases):
        as_numpy = values.numpy() if isinstance(values, strata.Tensor) else values
        [[got_step, got]] = histograms[tag]
        assert got_step == step
        want = _pytorch_histogram(as_numpy, bins)
        assert got["bucket"] == want["bucket"], tag
        np.testing.assert_allclose(got["bucket_limit"], want["bucket_limit"], rtol=1e-12, err_msg=tag)
        for field in ("min", "max", "num", "sum", "sum_squares"):
            assert math.isclose(got[field], want[field], rel_tol=1e-12), (tag, field)


def test_bad_values_are_refused(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(TypeError, match="scalar_value must be a number, got str"):
            w.add_scalar("x", "1.0", 0)
        with pytest.raises(strata.InvalidArgumentError, match=r"tensor of shape \(2,\)"):
            w.add_scalar("x", strata.tensor([1.0, 2.0]), 0)
        with pytest.raises(TypeError, match="global_step must be an int"):
            w.add_scalar("x", 1.0, 1.5)
        with pytest.raises(strata.InvalidArgumentError, match="no values"):
            w.add_histogram("h", np.array([]), 0)
        with pytest.raises(strata.InvalidArgumentError, match="finite"):
            w.add_histogram("h", [1.0, float("nan")], 0)
        with pytest.raises(TypeError, match="bins"):
            w.add_histogram("h", [1.0], 0, bins=2.5)
        with pytest.raises(NotImplementedError, match="new_style"):
            w.add_scalar("x", 1.0, 0, new_style=True)
    with pytest.raises(strata.IOError, match="closed"):
        w.add_scalar("x", 1.0, 0)
    (tmp_path / "plain").write_text("")
    with pytest.raises(strata.IOError, match=str(tmp_path / "plain" / "run")):
        SummaryWriter(tmp_path / "plain" / "run")


def test_default_log_dir_is_pytorchs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_x")
    w.close()
    assert w.get_logdir().startswith("runs" + os.sep) and w.get_logdir().endswith("_x")
    assert Path(w.file).parent == Path(w.get_logdir())


KILLED_WRITER = textwrap.dedent("""
    import sys
    from strata.utils.tensorboard import SummaryWriter
    w = SummaryWriter(sys.argv[1])
    print(w.file, flush=True)
    step = 0
    while True:
        w.add_scalar("loss", step * 0.5, step)
        step += 1
""")


def test_killed_writer_is_read_up_to_its_last_whole_record(tmp_path, tensorboard_reader):
    child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(tmp_path / "run")], stdout=subprocess.PIPE,
                             text=True)
    file = Path(child.stdout.readline().strip())
    deadline = time.monotonic() + 30
    while file.stat().st_size < 50_000 and time.monotonic() < deadline:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    child.stdout.close()
    events = tensorboard_reader(tmp_path / "run")["."]["scalars"]["loss"]
    assert len(events) > 500
    assert [(e[0], e[1]) for e in events] == [(s, s * 0.5) for s in range(len(events))]
    # A record cut short (as a kill in the middle of a write(2) can leave it) is left out, and nothing before it.
    with open(file, "r+b") as f:
        f.truncate(file.stat().st_size - 5)
    cut = tensorboard_reader(tmp_path / "run")["."]["scalars"]["loss"]
    assert [(e[0], e[1]) for e in cut] == [(s, s * 0.5) for s in range(len(events) - 1)]


def _strata_train():
    tool = BUILD / "bin" / "strata-train"
    if not tool.exists():
        pytest.skip(f"{tool} is not built")
    return str(tool)


def test_strata_train_logdir(tmp_path, tensorboard_reader):
    """A two-epoch run of 4 steps each: every step's loss and rate, and every epoch's figures as --json gives them."""
    run = subprocess.run([_strata_train(), "--device", "cpu", "--epochs", "2", "--train-images", "256",
                          "--test-images", "64", "--batch-size", "64", "--json", "--logdir", str(tmp_path / "runs")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    runs = tensorboard_reader(tmp_path / "runs")
    assert list(runs) == ["."]
    scalars = runs["."]["scalars"]
    epoch_tags = ["epoch/train_loss", "epoch/train_accuracy", "epoch/test_accuracy", "epoch/seconds",
                  "epoch/images_per_second", "memory/peak_mib/cpu", "transfers/synchronizations",
                  "transfers/host_to_device_copies", "transfers/device_to_host_copies",
                  "transfers/device_to_device_copies"]
    assert sorted(scalars) == sorted(["step/loss", "step/lr"] + epoch_tags)
    assert [e[0] for e in scalars["step/loss"]] == list(range(1, 9))
    assert [(e[0], e[1]) for e in scalars["step/lr"]] == [(s, _f32(0.01)) for s in range(1, 9)]
    for epoch, r in enumerate(report["epoch_reports"]):
        # Equal batches: the epoch's loss is the mean of its steps'.
        losses = [e[1] for e in scalars["step/loss"][4 * epoch:4 * epoch + 4]]
        assert math.isclose(np.mean(losses), r["train_loss"], rel_tol=1e-5)
        json_values = {"epoch/train_loss": r["train_loss"], "epoch/train_accuracy": r["train_accuracy"],
                       "epoch/test_accuracy": r["test_accuracy"], "epoch/seconds": r["seconds"],
                       "epoch/images_per_second": r["images_per_second"],
                       "memory/peak_mib/cpu": r["peak_memory_bytes"] / 2**20,
                       "transfers/synchronizations": r["synchronizations"],
                       "transfers/host_to_device_copies": r["host_to_device_copies"],
                       "transfers/device_to_host_copies": r["device_to_host_copies"],
                       "transfers/device_to_device_copies": r["device_to_device_copies"]}
        for tag, value in json_values.items():
            assert scalars[tag][epoch][:2] == [4 * (epoch + 1), _f32(value)], tag
    assert scalars["memory/peak_mib/cpu"][0][1] > 0


def test_strata_train_refuses_an_unwritable_logdir_before_training(tmp_path):
    (tmp_path / "plain").write_text("")
    bad = tmp_path / "plain" / "runs"
    run = subprocess.run([_strata_train(), "--device", "cpu", "--epochs", "1", "--train-images", "64",
                          "--test-images", "64", "--logdir", str(bad), "--data", str(tmp_path / "no-data")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stderr.startswith(f"strata-train: error: --logdir '{bad}' cannot be written"), run.stderr
    assert "no-data" not in run.stderr  # refused before the data is read
    assert "epoch" not in run.stdout
