#!/usr/bin/env python3
"""@strata.jit's vector add of 10M floats beside strata.add and Numba's @njit(parallel=True), in one process, the
sides in turns (the order rotating each round). Run it with the benchmark's environment, which `run` makes:

    build/bench-venv/bin/python bench/jit-kernels/python_jit.py [--preset cpu] [--rounds 7]
"""
import argparse
import os
import statistics
import sys
import time

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--preset", default="cpu")
parser.add_argument("--rounds", type=int, default=7)
args = parser.parse_args()
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "build", args.preset, "python"))

import numba  # noqa: E402
import numpy as np  # noqa: E402

import strata  # noqa: E402

N = 10_000_000


@strata.jit
def add(a, b, c):
    i = strata.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


@strata.jit(boundscheck=False)
def add_unchecked(a, b, c):
    i = strata.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


@numba.njit(parallel=True)
def numba_add(a, b, c):
    for i in numba.prange(c.size):
        c[i] = a[i] + b[i]


a, b, c = strata.rand(N), strata.rand(N), strata.empty(N)
an, bn, cn = a.numpy(), b.numpy(), np.empty(N, np.float32)
sides = {
    "strata.jit": lambda: add.forall(N)(a, b, c),
    "strata.jit boundscheck=False": lambda: add_unchecked.forall(N)(a, b, c),
    "strata.add": lambda: a + b,
    "numba parallel": lambda: numba_add(an, bn, cn),
}
for f in sides.values():  # compile and warm up
    f()
times = {k: [] for k in sides}
order = list(sides)
for r in range(args.rounds):
    for k in order[r % len(order):] + order[:r % len(order)]:
        t = time.perf_counter()
        for _ in range(10):
            sides[k]()
        times[k].append((time.perf_counter() - t) / 10 * 1e3)
print(f"10M-float add; {args.rounds} rounds x 10 calls; loadavg {os.getloadavg()[0]:.1f}")
for k, v in times.items():
    print(f"  {k:30s} {statistics.median(v):7.2f} ms ({min(v):.2f}-{max(v):.2f})")
for k in ("strata.jit", "strata.jit boundscheck=False"):
    for other in ("strata.add", "numba parallel"):
        ratios = [o / j for o, j in zip(times[other], times[k])]
        print(f"  throughput {k} / {other}: {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
