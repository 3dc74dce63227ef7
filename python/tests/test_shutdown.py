"""The interpreter exits cleanly while a daemon thread is inside Strata (Note [Taking the GIL back at exit] in
python/src/bindings.h). Each case runs in its own interpreter with a timeout."""
import subprocess
import sys
import textwrap

import pytest

_WORK = {
    "product": "w = strata.randn(256, 256)\ndef step():\n    (w @ w).sum().item()\n",
    "convolution": ("conv = nn.Conv2d(3, 16, 3)\nx = strata.randn(8, 3, 64, 64)\n"
                    "def step():\n    conv(x)\n"),
    "backward": ("w = strata.randn(128, 128, requires_grad=True)\nx = strata.randn(64, 128)\n"
                 "def step():\n    (x @ w).relu().sum().backward()\n"),
    "data loader": ("from strata.data import DataLoader, TensorDataset\n"
                    "ds = TensorDataset(strata.randn(4096, 64), strata.arange(4096))\n"
                    "def step():\n    for _ in DataLoader(ds, batch_size=64, prefetch=2):\n        pass\n"),
}


@pytest.mark.parametrize("work", sorted(_WORK))
@pytest.mark.parametrize("threads", [1, 3])
def test_exit_while_daemon_threads_compute(work, threads):
    script = "import threading, time\nimport strata\nfrom strata import nn\n" + _WORK[work] + textwrap.dedent(f"""
        started = threading.Barrier({threads} + 1)
        def loop():
            step()
            started.wait()
            while True:
                step()
        for _ in range({threads}):
            threading.Thread(target=loop, daemon=True).start()
        started.wait()
        time.sleep(0.05)
        print("exiting", flush=True)
    """)
    for _ in range(3):
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and result.stdout == "exiting\n", result.stderr


def test_exit_from_sys_exit_in_main_while_a_daemon_thread_computes():
    script = textwrap.dedent("""
        import sys, threading, time
        import strata
        w = strata.randn(256, 256)
        def loop():
            while True:
                (w @ w).sum().item()
        threading.Thread(target=loop, daemon=True).start()
        time.sleep(0.05)
        sys.exit(7)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 7, result.stderr
