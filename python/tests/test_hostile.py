"""A hostile-input harness for the Python argument conversions (issue 38): a table of calls times a table of bad or
unusual arguments, each call run in a worker process, in batches on a small pool. Every call must return or raise a
Python exception: a signal (a crash, an abort, an AddressSanitizer report) or a hang (the batch's timeout) is a
finding, reported with the call that caused it. Bounded to about a minute on two cores.

scripts/python-asan runs this file with the module built under AddressSanitizer; HOSTILE_BATCH_TIMEOUT (seconds, 30)
and HOSTILE_BATCH_SIZE (calls per worker, 150) suit that slower build, whose workers take longer to start."""
import concurrent.futures
import itertools
import json
import os
import subprocess
import sys

# Arguments a user should never pass, or passes by mistake: wrong types, None, huge and negative ints, NaN, nested
# and ragged lists, NumPy scalars and arrays of odd dtypes, strings, bytes, 0-d, empty and integer tensors.
BAD = [
    "None", "-1", "-2**63", "2**63", "2**70", "0", "1.5", "float('nan')", "float('inf')", "True", "'3'", "''",
    "b'x'", "[]", "[[1, 2], [3]]", "[1, [2]]", "[2**40, 2**40]", "[-1, -1]", "(None,) * 70", "{}", "object()",
    "slice(None, None, -1)", "...", "range(3)", "np.float32(2)", "np.int64(-5)", "np.uint64(2**63)",
    "np.array([1, 2], dtype=np.uint64)", "np.array([1.5, 2])", "np.array(['a'])", "np.array([], dtype=object)",
    "np.zeros((2, 0))", "np.complex64(1j)", "np.array([[1, 2]])", "strata.tensor(3)", "strata.tensor(2.5)",
    "strata.ones(0)", "strata.ones(2, 3)", "strata.tensor([-1])", "strata.tensor([True])", "strata.tensor([2**40])",
    "strata.Tensor.__new__(strata.Tensor)", "strata.float32", "strata.device('cpu')", "strata.Size([2, -3])",
]

# Calls with one argument slot `{}`; statements may set up what they need first.
CALLS = [
    "strata.zeros({})", "strata.ones(2, {})", "strata.empty({})", "strata.full({}, 1.0)", "strata.full((2,), {})",
    "strata.zeros(2, dtype={})", "strata.zeros(2, device={})", "strata.arange({})", "strata.arange(0, 4, {})",
    "strata.tensor({})", "strata.as_tensor({})", "strata.from_numpy({})", "strata.from_dlpack({})",
    "strata.randint(0, {}, (2,))", "strata.eye({})", "strata.linspace(0, 1, {})", "strata.device({})",
    "strata.device('cuda', {})", "strata.ones(2, 3).reshape({})", "strata.ones(2, 3).view({})",
    "strata.ones(2, 3).to({})", "strata.ones(2, 3)[{}]", "t = strata.ones(2, 3); t[{}] = 1.0",
    "t = strata.ones(2, 3); t[0] = {}", "strata.ones(2, 3).sum({})", "strata.ones(2, 3).max({})",
    "strata.ones(2, 3).permute({})", "strata.ones(2, 1).expand({})", "strata.ones(2, 3).transpose(0, {})",
    "strata.ones(2, 3).add({})", "t = strata.ones(2, 3); t += {}", "strata.ones(2, 3) * {}",
    "strata.ones(2, 3).size({})", "strata.ones(2, 3).unsqueeze({})", "strata.ones(2, 3).narrow(0, 0, {})",
    "strata.ones(2, 3).index_select(1, {})", "strata.ones(2, 3).fill_({})", "strata.ones(2, 3).copy_({})",
    "strata.ones(2, requires_grad=True).sum().backward({})", "strata.ones(2, 3).clamp({})",
    "strata.cat({})", "strata.stack([strata.ones(2), {}])", "strata.where(strata.ones(2) > 0, strata.ones(2), {})",
    "strata.matmul(strata.ones(2, 2), {})", "strata.max(strata.ones(2), {})", "repr({})",
    "p = strata.ones(2, requires_grad=True); p.grad = {}", "p = strata.ones(2, requires_grad=True); p.data = {}",
    "nn.Linear({}, 2)", "nn.Conv2d(1, 1, {})", "nn.LayerNorm({})", "nn.functional.relu({})",
    "strata.optim.SGD({}, lr=0.1)", "strata.optim.SGD([strata.ones(2, requires_grad=True)], lr={})",
    "nn.utils.clip_grad_norm_({}, 1.0)", "strata.ones(2, 3).to(dtype={})", "strata.ones(2, 3).cuda({})",
    "strata.ones(2, 3).stride({})", "strata.ones(2, 3).squeeze({})", "strata.ones(2, 3).flatten({})",
    "strata.ones(2, 3).select(0, {})", "strata.ones(2, 3).gather(1, {})", "strata.ones(2, 3).softmax({})",
    "strata.ones(2, 3).requires_grad_({})", "strata.ones(2, 3).type_as({})", "strata.ones(2, 3) @ {}",
    "strata.ones(2, 3) == {}", "strata.ones(2, 3).expand_as({})",
]

# Calls with two slots, filled with every pair of arguments.
PAIRS = [
    "strata.full({}, {})", "strata.ones(2, 3)[{}, {}]", "strata.ones(2, 3).transpose({}, {})",
    "strata.arange({}, {})", "strata.zeros({}, dtype={})",
]

# pybind11's and C++'s words, which must never reach a Python user (Note [Argument errors in Python's terms]).
LEAKS = ["Unable to cast", "incompatible function arguments", "incompatible constructor arguments", "C++ type",
         "NoGradGuard", "DType::", "std::"]

WORKER = r"""
import json, sys, warnings
import numpy as np
import strata
from strata import nn
warnings.simplefilter("ignore")
for i, statement in enumerate(json.loads(sys.stdin.read())):
    print(i, flush=True)
    try:
        exec(statement, {"strata": strata, "np": np, "nn": nn})
    except Exception as e:
        if any(leak in str(e) for leak in LEAKS):
            print("leak", i, json.dumps(str(e)[:300]), flush=True)
print("end", flush=True)
"""


def statements():
    one = [call.replace("{}", arg) for call, arg in itertools.product(CALLS, BAD)]
    two = [call.replace("{}", a, 1).replace("{}", b, 1) for call, a, b in itertools.product(PAIRS, BAD, BAD)]
    return one + two


def run_batch(batch, timeout):
    """Runs `batch` in workers; returns the findings: (statement, what happened)."""
    findings = []
    while batch:
        worker = subprocess.Popen([sys.executable, "-c", f"LEAKS = {LEAKS!r}\n" + WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            out, err = worker.communicate(json.dumps(batch), timeout=timeout)
            what = f"killed by signal {-worker.returncode}" if worker.returncode < 0 else f"exit {worker.returncode}"
        except subprocess.TimeoutExpired:
            worker.kill()
            out, err = worker.communicate()
            what = f"still running after {timeout} s"
        lines = [line for line in out.splitlines() if not line.startswith("leak ")]
        for line in out.splitlines():
            if line.startswith("leak "):
                _, index, message = line.split(" ", 2)
                findings.append((batch[int(index)], "message in C++ terms: " + json.loads(message)))
        if lines[-1:] == ["end"] and worker.returncode == 0:
            return findings
        if not lines:
            findings.append(("(the worker, before its first call)", what + ": " + err.strip()[-600:]))
            return findings
        # The last index printed is the statement that was running; the rest of the batch goes on in a new worker.
        started = int(lines[-1]) if lines[-1] != "end" else len(batch) - 1
        findings.append((batch[started], what + ": " + err.strip()[-600:]))
        batch = batch[started + 1:]
    return findings


def test_no_call_crashes_or_hangs():
    timeout = float(os.environ.get("HOSTILE_BATCH_TIMEOUT", "30"))
    size = int(os.environ.get("HOSTILE_BATCH_SIZE", "150"))
    every = statements()
    batches = [every[i:i + size] for i in range(0, len(every), size)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        findings = [f for found in pool.map(lambda b: run_batch(b, timeout), batches) for f in found]
    assert not findings, "\n".join(f"{statement}\n    {what}" for statement, what in findings)
