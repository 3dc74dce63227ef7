"""Records what each tutorial of this folder prints under PyTorch, in expected/<name>.txt: run it with a Python
that has PyTorch 2.15 and NumPy 1.24 (the data's generator), from the repository root:

    python3 python/tests/tutorials_ported/record.py

test_tutorials_ported.py runs the same scripts with `torch` renamed to `strata` and compares."""
import pathlib
import subprocess
import sys

import torch

HERE = pathlib.Path(__file__).resolve().parent
SCRIPTS = sorted(p for p in HERE.glob("*.py") if p.name != "record.py")

if __name__ == "__main__":
    (HERE / "expected").mkdir(exist_ok=True)
    for script in SCRIPTS:
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=600)
        (HERE / "expected" / f"{script.stem}.txt").write_text(out.stdout)
        print(f"{script.name}: {len(out.stdout.splitlines())} lines with torch {torch.__version__}")
