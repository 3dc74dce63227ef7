"""Numba's "Writing CUDA kernels" examples with @strata.jit: the kernels are the article's with `cuda` renamed to
`strata`, translated into CUDA-dialect source and compiled by strata.RawKernel, on the CPU and, when there is one,
the GPU. Each result is checked against NumPy. Run from the build tree:
PYTHONPATH=build/cpu/python python3 python/tutorials/numba_article.py"""
import math
import time

import numpy as np

import strata
from strata import float32

DEVICE = "cuda" if strata.cuda.is_available() else "cpu"


# ---- Kernel declaration and invocation: one thread per element ----
@strata.jit
def increment_by_one(an_array):
    pos = strata.grid(1)
    if pos < an_array.size:  # Check array boundaries
        an_array[pos] += 1


@strata.jit
def increment_a_2D_array(an_array):  # noqa: N802 (the article's name)
    x, y = strata.grid(2)
    if x < an_array.shape[0] and y < an_array.shape[1]:
        an_array[x, y] += 1


# ---- A vector add of 10 million floats, configured by forall ----
@strata.jit
def f(a, b, c):
    # like threadIdx.x + (blockIdx.x * blockDim.x)
    tid = strata.grid(1)
    size = len(c)
    if tid < size:
        c[tid] = a[tid] + b[tid]


# ---- Matrix multiplication with shared memory ----
# Controls threads per block and shared memory usage. The computation will be done on blocks of TPBxTPB elements.
# TPB should not be larger than 32 in this example
TPB = 16


@strata.jit
def fast_matmul(A, B, C):  # noqa: N803 (the article's names)
    """Perform matrix multiplication of C = A * B using CUDA shared memory.

    Reference: https://stackoverflow.com/a/64198479/13697228 by @RobertCrovella"""
    # Define an array in the shared memory. The size and type of the arrays must be known at compile time
    sA = strata.shared.array(shape=(TPB, TPB), dtype=float32)  # noqa: N806
    sB = strata.shared.array(shape=(TPB, TPB), dtype=float32)  # noqa: N806

    x, y = strata.grid(2)

    tx = strata.threadIdx.x
    ty = strata.threadIdx.y
    bpg = strata.gridDim.x  # blocks per grid

    # Each thread computes one element in the result matrix. The dot product is chunked into dot products of TPB-long
    # vectors.
    tmp = float32(0.)
    for i in range(bpg):
        # Preload data into shared memory
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]

        # Wait until all threads finish preloading
        strata.syncthreads()

        # Computes partial product on the shared memory
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]

        # Wait until all threads finish computing
        strata.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


def timed(fn, sync, repeats=5):
    fn()  # the first launch compiles (or loads from the kernel cache)
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    sync()
    return (time.perf_counter() - start) / repeats


def main():
    sync = lambda: strata.synchronize(DEVICE)  # noqa: E731

    # increment_by_one on a NumPy array (used in place on the CPU) and on a tensor of the device.
    an_array = np.arange(1000, dtype=np.float32)
    threadsperblock = 32
    blockspergrid = (an_array.size + (threadsperblock - 1)) // threadsperblock
    increment_by_one[blockspergrid, threadsperblock](an_array)
    on_device = strata.tensor(np.arange(1000, dtype=np.float32), device=DEVICE)
    increment_by_one[blockspergrid, threadsperblock](on_device)
    expected = np.arange(1000, dtype=np.float32) + 1
    assert np.array_equal(an_array, expected) and np.array_equal(on_device.cpu().numpy(), expected)
    print("increment_by_one 1-D: matches NumPy")

    an_array = np.zeros((100, 60), dtype=np.int32)
    threadsperblock = (16, 16)
    blockspergrid_x = math.ceil(an_array.shape[0] / threadsperblock[0])
    blockspergrid_y = math.ceil(an_array.shape[1] / threadsperblock[1])
    blockspergrid = (blockspergrid_x, blockspergrid_y)
    increment_a_2D_array[blockspergrid, threadsperblock](an_array)
    assert np.array_equal(an_array, np.ones((100, 60), dtype=np.int32))
    print("increment_by_one 2-D: matches NumPy")

    n = 10_000_000
    a_np, b_np = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    a, b = strata.tensor(a_np, device=DEVICE), strata.tensor(b_np, device=DEVICE)
    c = strata.empty(n, device=DEVICE)
    seconds = timed(lambda: f.forall(n)(a, b, c), sync)
    numpy_seconds = timed(lambda: np.add(a_np, b_np), lambda: None)
    assert np.array_equal(c.cpu().numpy(), a_np + b_np)
    print(f"vector add: matches NumPy ({n} floats on {DEVICE}: {seconds * 1e3:.2f} ms; NumPy {numpy_seconds * 1e3:.2f} "
          "ms)")

    x_h = np.random.rand(100, 70).astype(np.float32)
    y_h = np.random.rand(70, 90).astype(np.float32)
    z_h = np.zeros((100, 90), dtype=np.float32)
    threadsperblock = (TPB, TPB)
    blockspergrid_x = math.ceil(z_h.shape[1] / threadsperblock[0])
    blockspergrid_y = math.ceil(z_h.shape[0] / threadsperblock[1])
    # The loop over tiles runs gridDim.x times: the grid must cover the inner dimension too.
    blockspergrid_x = max(blockspergrid_x, math.ceil(x_h.shape[1] / TPB))
    blockspergrid = (blockspergrid_x, blockspergrid_y)
    x_d, y_d = strata.tensor(x_h, device=DEVICE), strata.tensor(y_h, device=DEVICE)
    z_d = strata.tensor(z_h, device=DEVICE)
    fast_matmul[blockspergrid, threadsperblock](x_d, y_d, z_d)
    z_h = z_d.cpu().numpy()
    np.testing.assert_allclose(z_h, x_h @ y_h, rtol=1e-5)
    print("tiled matmul: matches NumPy")


if __name__ == "__main__":
    main()
