"""strata-train's progress with its stdout a terminal (a pseudo-terminal from Python's pty module): a bar redrawn with
carriage returns when run by hand, plain lines under an MPI launcher, which gives each rank a pseudo-terminal even
when mpirun's output goes to a file (Note [Progress under an MPI launcher] in tools/train/progress.h). PMIX_RANK
alone marks the launcher here: it makes strata-train print lines without starting MPI, which only Open MPI's
OMPI_COMM_WORLD_SIZE does."""
import os
import pathlib
import pty
import re
import subprocess

import pytest

import strata

TRAIN = pathlib.Path(strata.__file__).resolve().parents[2] / "bin" / "strata-train"
FASHION_MNIST = pathlib.Path("/usr/share/datasets/fashion-mnist")


def run_on_a_terminal(**variables):
    if not TRAIN.exists():
        pytest.skip(f"strata-train is not built beside this Python module ({TRAIN})")
    if not FASHION_MNIST.is_dir():
        pytest.skip("Fashion-MNIST is not installed (Debian's dataset-fashion-mnist)")
    env = {k: v for k, v in os.environ.items() if k not in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK")}
    env.update(variables)
    controller, terminal = pty.openpty()
    # 2048 images, batch 64: 32 steps.
    proc = subprocess.Popen([str(TRAIN), "--device", "cpu", "--epochs", "1", "--train-images", "2048",
                             "--test-images", "128"], stdout=terminal, stderr=subprocess.PIPE, env=env)
    os.close(terminal)
    out = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(controller)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()
    return out.decode()


def expect_sensible_rates(out):
    """No progress rate far above the epoch's average: the first frame once divided one step's images by the
    microseconds since the bar was made ("108108108 img/s")."""
    epoch_rate = float(re.search(r"epoch 1/1  train loss .*  (\d+) img/s", out).group(1))
    progress = [float(r) for r in re.findall(r"(\d+) img/s", out.split("train loss")[0])]
    assert max(progress, default=0) < 10 * epoch_rate, out  # a fast machine may show no rate before the end


def test_by_hand_a_redrawn_bar():
    out = run_on_a_terminal()
    assert "\repoch 1/1 [" in out, repr(out)
    assert "\repoch 1/1  train loss" in out, "the bar is cleared before the epoch's line"
    expect_sensible_rates(out)


def test_under_an_mpi_launcher_plain_lines_at_each_tenth_with_sensible_rates():
    out = run_on_a_terminal(PMIX_RANK="0").replace("\r\n", "\n")  # the terminal's line discipline adds the \r
    assert "\r" not in out, repr(out)
    lines = re.findall(r"^epoch 1/1  step (\d+)/32 \((\d+)%\)  .* img/s  ETA .*s$", out, re.M)
    assert [int(percent) for _, percent in lines] == [10, 20, 30, 40, 50, 60, 70, 80, 90], out
    expect_sensible_rates(out)
