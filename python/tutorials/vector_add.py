"""Adding two vectors of 10 million floats on the CPU and, when there is one, the GPU (the Numba tutorial's
experiment), against NumPy on the CPU. Run from the build tree: PYTHONPATH=build/default/python python3 <this>."""
import time

import numpy as np

import strata

N = 10_000_000
REPEATS = 10


def timed(fn, sync):
    fn()  # warm-up: the allocator caches the result's memory
    sync()
    start = time.perf_counter()
    for _ in range(REPEATS):
        result = fn()
    sync()
    return result, (time.perf_counter() - start) / REPEATS


def report(name, seconds, first):
    gbs = 3 * N * 4 / seconds / 1e9
    print(f"{name:<7} c = a + b on {N} floats: {seconds * 1e3:8.3f} ms  ({gbs:.1f} GB/s), c[0] = {first:.1f}")


def main():
    a_np, b_np = np.ones(N, dtype=np.float32), np.full(N, 2.0, dtype=np.float32)
    c_np, seconds = timed(lambda: a_np + b_np, lambda: None)
    report("numpy", seconds, c_np[0])

    devices = ["cpu"] + (["cuda:0"] if strata.cuda.is_available() else [])
    for device in devices:
        a = strata.ones(N, device=device)
        b = strata.full((N,), 2.0, device=device)
        c, seconds = timed(lambda: a + b, lambda: strata.synchronize(device))
        report(device, seconds, c[0].item())
        assert c[0].item() == 3.0 and c[-1].item() == 3.0
    if not strata.cuda.is_available():
        print(f"cuda    skipped: {strata.cuda.unavailable_reason()}")

    # NumPy's arrays and Strata's CPU tensors are the same memory: no copy either way.
    shared = strata.from_numpy(a_np)
    assert np.shares_memory(shared.numpy(), a_np)


if __name__ == "__main__":
    main()
