"""A forked child computes after its parent did (Note [Thread pools after fork] in strata/runtime/parallel.cpp).

Each case runs in its own interpreter with a timeout, so that a hang or a crash fails the test, never the suite."""
import os
import subprocess
import sys
import textwrap

import pytest

_PARENT_WORK = """
import strata
from strata import nn
a = strata.randn(256, 256)
conv = nn.Conv2d(3, 8, 3, padding=1)
x = strata.randn(4, 3, 32, 32, requires_grad=True)
def work():
    p = (a @ a).sum().item()
    conv(x).sum().backward()
    return p
expected = work()
def ok():  # a child's products may run on fewer threads: the same sum, not the same bits
    return abs(work() - expected) <= 1e-4 * (1 + abs(expected))
"""


def run_script(body, timeout=60):
    env = dict(os.environ)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(_PARENT_WORK) + textwrap.dedent(body)],
                            capture_output=True, text=True, timeout=timeout, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_os_fork_child_runs_products_and_convolutions():
    out = run_script("""
        import os
        pid = os.fork()
        if pid == 0:
            os._exit(0 if ok() else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    assert out.split() == ["0"]


def test_a_child_of_a_child_computes_too():
    out = run_script("""
        import os
        def fork_and_work(depth):
            pid = os.fork()
            if pid == 0:
                good = ok() and (depth == 0 or fork_and_work(depth - 1) == 0)
                os._exit(0 if good else 3)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        print(fork_and_work(2))
    """)
    assert out.split() == ["0"]


def test_multiprocessing_fork_pool():
    out = run_script("""
        import multiprocessing as mp
        def job(_):
            return ok()
        with mp.get_context("fork").Pool(2) as pool:
            print(pool.map(job, range(4)) == [True] * 4)
    """)
    assert out.split() == ["True"]


def test_process_pool_executor():
    out = run_script("""
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor
        def job(_):
            return ok()
        with ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as ex:
            print(list(ex.map(job, range(4))) == [True] * 4)
    """)
    assert out.split() == ["True"]


def test_fork_while_another_thread_computes():
    # The child must not inherit a pool whose lock or counters the other thread held at the fork.
    out = run_script("""
        import os, threading
        stop = False
        def loop():
            while not stop:
                work()
        t = threading.Thread(target=loop)
        t.start()
        codes = []
        for _ in range(5):
            pid = os.fork()
            if pid == 0:
                os._exit(0 if ok() else 3)
            codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        stop = True
        t.join()
        print(codes)
    """)
    assert out.split() == ["[0,", "0,", "0,", "0,", "0]"]
