"""torch.distributed's all_reduce on gloo, timed as strata-bench-dist times Strata's: f32 sum between the ranks of
`mpirun -n 2` (rank and world size from Open MPI's variables), sizes 1 KiB to 64 MiB (1 MiB with --quick), each the
mean of two turns' medians over rounds of back-to-back calls, a barrier before each round. Rank 0 prints one JSON
document: {"ranks": 2, "torch": "2.15.0", "rows": [{"bytes": ..., "torch_us": ...}, ...]}.

    OMP_NUM_THREADS=1 mpirun -n 2 --allow-run-as-root --oversubscribe --bind-to none \\
        $(bench/compare-pytorch-python/torch-venv build/default) bench/dist-torch/gloo_allreduce.py [--quick]
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def median_call_seconds(call, rounds, calls):
    times = []
    for _ in range(rounds):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def main():
    quick = "--quick" in sys.argv[1:]
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    rows = []
    max_shift = 20 if quick else 26
    for shift in range(10, max_shift + 1, 2):
        nbytes = 1 << shift
        t = torch.ones(nbytes // 4, dtype=torch.float32)
        # As strata-bench-dist: 64 MiB moved a round (4 MiB with --quick), at least one call.
        calls = max(1, (64 << 20) // nbytes // (16 if quick else 4))
        rounds = 3 if quick else 7
        # gloo takes 1-3 ms a call at small sizes: fewer calls keep the run short, enough to time.
        calls = min(calls, 200 if quick else 1000)
        total = 0.0
        for _ in range(2):
            total += median_call_seconds(lambda: dist.all_reduce(t), rounds, calls)
        rows.append({"bytes": nbytes, "torch_us": total / 2 * 1e6})
    if rank == 0:
        print(json.dumps({"ranks": size, "torch": torch.__version__.split("+")[0], "rows": rows}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
