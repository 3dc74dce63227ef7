#!/usr/bin/env python3
"""The first call of @strata.jit's 10M-float add in a new process, with an empty kernel cache (translate, compile,
launch) and with a warm one, beside Numba's first @njit(parallel=True) call and its cache=True second process:

    /usr/bin/python3 bench/jit-kernels/python_jit_first_call.py      (Numba from build/bench-venv, which `run` makes)
"""
import os, subprocess, sys, tempfile, statistics, textwrap
root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
venv_py = f"{root}/build/bench-venv/bin/python"
STRATA = textwrap.dedent(f"""
    import sys, time; sys.path.insert(0, "{root}/build/cpu/python")
    import strata
    n = 10_000_000
    a, b, c = strata.rand(n), strata.rand(n), strata.empty(n)
    @strata.jit
    def add(a, b, c):
        i = strata.grid(1)
        if i < c.size:
            c[i] = a[i] + b[i]
    t = time.perf_counter(); add.forall(n)(a, b, c); print((time.perf_counter() - t) * 1e3)
""")
NUMBA = textwrap.dedent("""
    import time, numba, numpy as np
    n = 10_000_000
    a, b, c = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32), np.empty(n, np.float32)
    @numba.njit(parallel=True, cache=CACHE)
    def add(a, b, c):
        for i in numba.prange(c.size):
            c[i] = a[i] + b[i]
    t = time.perf_counter(); add(a, b, c); print((time.perf_counter() - t) * 1e3)
""")
res = {k: [] for k in ("strata cold", "strata warm", "numba njit", "numba cache=True 2nd")}
for r in range(5):
    d = tempfile.mkdtemp()
    env = {**os.environ, "STRATA_KERNEL_CACHE": d, "NUMBA_CACHE_DIR": d}
    sf = os.path.join(d, "sj.py"); open(sf, "w").write(STRATA)
    for k in ("strata cold", "strata warm"):
        out = subprocess.run([sys.executable, sf], env=env, capture_output=True, text=True, cwd=d)
        res[k].append(float(out.stdout or "nan"))
        if not out.stdout: print(out.stderr[-500:])
    res["numba njit"].append(float(subprocess.run([venv_py, "-c", NUMBA.replace("CACHE", "False")], env=env, capture_output=True, text=True, cwd=d).stdout))
    f = os.path.join(d, "nb.py"); open(f, "w").write(NUMBA.replace("CACHE", "True"))
    subprocess.run([venv_py, f], env=env, capture_output=True, text=True, cwd=d)
    res["numba cache=True 2nd"].append(float(subprocess.run([venv_py, f], env=env, capture_output=True, text=True, cwd=d).stdout))
for k, v in res.items(): print(f"{k:22s} {statistics.median(v):8.1f} ms  ({min(v):.1f}-{max(v):.1f})")
