"""Tutorial-style programs written for PyTorch (tutorials_ported/: PyTorch's Tensors, Autograd, Build the Neural
Network, Optimization and DCGAN tutorials, D2L's MLP, CNN and RNN chapters, schedulers with clipping, containers
with train/eval) run with `torch` renamed to `strata` and nothing else, and print what PyTorch 2.15 printed
(tutorials_ported/expected, written by tutorials_ported/record.py): the same words, numbers within float32
rounding carried through a few training steps."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent / "tutorials_ported"
SCRIPTS = sorted(p.stem for p in HERE.glob("*.py") if p.name != "record.py")
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def renamed(source):
    """The only change: the library's name."""
    return re.sub(r"\btorch\b", "strata", source)


def tokens(text):
    """Words, and numbers as floats, with the library's name put back."""
    text = text.replace("strata", "torch")
    return NUMBER.split(text), [float(n) for n in NUMBER.findall(text)]


@pytest.mark.parametrize("name", SCRIPTS)
def test_prints_what_pytorch_printed(name, tmp_path):
    script = tmp_path / f"{name}.py"
    script.write_text(renamed((HERE / f"{name}.py").read_text()))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr
    expected = (HERE / "expected" / f"{name}.txt").read_text()
    got_words, got_numbers = tokens(result.stdout)
    want_words, want_numbers = tokens(expected)
    assert got_words == want_words, f"{name}: the output differs in its text:\n{result.stdout}"
    for i, (got, want) in enumerate(zip(got_numbers, want_numbers)):
        assert got == pytest.approx(want, rel=1e-3, abs=2e-4), f"{name}: number {i} is {got}, PyTorch printed {want}"
