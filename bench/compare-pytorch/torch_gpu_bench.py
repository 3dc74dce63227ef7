#!/usr/bin/env python3
"""The GPU workloads of strata-bench written against PyTorch (and CuPy for the vector add), with the same metric
keys, printed as one JSON document like strata-bench --json. Run by bench/compare-pytorch/run on a GPU machine.

Every GPU time is device time between CUDA events after a warm-up, the median of repeated runs, as strata-bench
times its GPU work. The epoch keeps the whole training set on the GPU and draws batches by index (PyTorch at its
best for this network); strata-bench's epoch runs strata-train's DataLoader with pinned memory and prefetch.
"""
import argparse, gzip, json, os, statistics, sys, time

import torch
import torch.nn.functional as F

DEV = torch.device("cuda:0")


def gpu_ms(fn, repeats):
    fn()
    torch.cuda.synchronize()
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def put(m, key, value, unit, better):
    m[key] = {"value": float(value), "unit": unit, "better": better}


def matmul(o):
    m = {}
    sizes = [64, 256, 512] if o.quick else [64, 128, 256, 512, 1024, 2048, 4096]
    reps = 12 if o.quick else 20
    for name, dtype, tf32 in (("f32", torch.float32, False), ("tf32", torch.float32, True), ("bf16", torch.bfloat16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for n in sizes:
            a = torch.rand(n, n, device=DEV).to(dtype)
            b = torch.rand(n, n, device=DEV).to(dtype)
            ms = gpu_ms(lambda: torch.matmul(a, b), reps)
            put(m, f"matmul_gpu_{name}_n{n}", 2 * n ** 3 / (ms / 1e3) / 1e9, "GFLOP/s", "higher")
    torch.backends.cuda.matmul.allow_tf32 = False
    return m


def d2l(o):
    m = {}
    a = torch.randn(100, 100, device=DEV) * 0.1
    b = torch.randn(100, 100, device=DEV) * 0.1
    for each in (True, False):
        best = float("inf")
        for _ in range(1 if o.quick else 3):
            for timed in (False, True):  # one warm-up, one timed run
                t0 = time.perf_counter()
                printed, log = [], []
                for _ in range(1000):
                    c = torch.matmul(a, b)
                    if each:
                        printed.append(f"{c.norm().item()}")
                    else:
                        log.append(c.norm())
                if not each:
                    printed = [f"{v}" for v in torch.stack(log).cpu().tolist()]
                if timed:
                    best = min(best, time.perf_counter() - t0)
        put(m, "d2l_gpu_read_each_ms" if each else "d2l_gpu_log_on_device_ms", best * 1e3, "ms", "lower")
    return m


def vector_add(o):
    m = {}
    n = 10_000_000
    reps = 5 if o.quick else 15
    a = torch.full((n,), 1.5, device=DEV)
    b = torch.full((n,), 2.0, device=DEV)
    c = torch.empty(n, device=DEV)
    copy = 8 * n / (gpu_ms(lambda: c.copy_(a), reps) / 1e3) / 1e9
    into = 12 * n / (gpu_ms(lambda: torch.add(a, b, out=c), reps) / 1e3) / 1e9
    alloc = 12 * n / (gpu_ms(lambda: a + b, reps) / 1e3) / 1e9
    put(m, "vector_add_gpu_copy_gbps", copy, "GB/s", "higher")
    put(m, "vector_add_gpu_into_gbps", into, "GB/s", "higher")
    put(m, "vector_add_gpu_alloc_gbps", alloc, "GB/s", "higher")
    put(m, "vector_add_gpu_into_fraction", into / copy, "x copy", "higher")
    try:
        import cupy as cp
        ca, cb, cc = cp.full(n, 1.5, cp.float32), cp.full(n, 2.0, cp.float32), cp.empty(n, cp.float32)
        stream = torch.cuda.current_stream()
        with cp.cuda.ExternalStream(stream.cuda_stream):
            cms = gpu_ms(lambda: cp.add(ca, cb, out=cc), reps)
            ccopy = gpu_ms(lambda: cc.__setitem__(slice(None), ca), reps)
        put(m, "cupy_vector_add_gpu_into_gbps", 12 * n / (cms / 1e3) / 1e9, "GB/s", "higher")
        put(m, "cupy_vector_add_gpu_copy_gbps", 8 * n / (ccopy / 1e3) / 1e9, "GB/s", "higher")
    except ImportError as e:
        print(f"torch_gpu_bench: CuPy not measured: {e}", file=sys.stderr)
    return m


def conv(o):
    m = {}
    reps = 5 if o.quick else 21
    for kind, tf32 in (("f32", False), ("tf32", True)):
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        x = torch.randn(64, 32, 14, 14, device=DEV)
        w = torch.randn(64, 32, 3, 3, device=DEV) * 0.1
        bias = torch.zeros(64, device=DEV)
        go = torch.ones(64, 64, 14, 14, device=DEV)
        with torch.no_grad():
            put(m, f"conv2d_gpu_{kind}_fwd_ms", gpu_ms(lambda: F.conv2d(x, w, bias, 1, 1), reps), "ms", "lower")
        for t in (x, w, bias):
            t.requires_grad_()

        def conv_fb():
            x.grad = w.grad = bias.grad = None
            F.conv2d(x, w, bias, 1, 1).backward(go)
        put(m, f"conv2d_gpu_{kind}_fwd_bwd_ms", gpu_ms(conv_fb, reps), "ms", "lower")
        li = torch.randn(64, 3136, device=DEV, requires_grad=True)
        lw = (torch.randn(128, 3136, device=DEV) * 0.02).requires_grad_()
        lb = torch.zeros(128, device=DEV, requires_grad=True)
        lg = torch.ones(64, 128, device=DEV)

        def lin_fb():
            li.grad = lw.grad = lb.grad = None
            F.linear(li, lw, lb).backward(lg)
        put(m, f"linear_gpu_{kind}_fwd_bwd_ms", gpu_ms(lin_fb, reps), "ms", "lower")
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default for cuDNN
    torch.backends.cuda.matmul.allow_tf32 = False
    return m


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(shape)


def epoch(o):
    m = {}
    images = read_idx(os.path.join(o.data, "train-images-idx3-ubyte.gz")).to(DEV).float().div_(255).unsqueeze(1)
    labels = read_idx(os.path.join(o.data, "train-labels-idx1-ubyte.gz")).to(DEV).long()
    if o.quick:
        images, labels = images[:3200], labels[:3200]
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(64 * 7 * 7, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(DEV)
    sgd = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def train(n_images, max_steps=None):
        order = torch.randperm(n_images, device=DEV)
        loss_sum = torch.zeros((), device=DEV)
        correct = torch.zeros((), device=DEV, dtype=torch.long)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        steps = 0
        for i in range(0, n_images, 64):
            idx = order[i:i + 64]
            x, y = images[idx], labels[idx]
            logits = net(x)
            loss = F.cross_entropy(logits, y)
            sgd.zero_grad()
            loss.backward()
            sgd.step()
            with torch.no_grad():
                loss_sum += loss.detach() * y.numel()
                correct += (logits.argmax(1) == y).sum()
            steps += 1
            if max_steps and steps == max_steps:
                break
        loss_sum.item()
        return time.perf_counter() - t0

    train(640, 10)  # warm-up, as strata-bench's
    seconds = train(images.shape[0])
    put(m, "epoch_gpu_seconds", seconds, "s", "lower")
    put(m, "epoch_gpu_images_per_s", images.shape[0] / seconds, "img/s", "higher")
    return m


def overhead(o):
    m = {}
    a = torch.full((16,), 1.5, device=DEV)
    b = torch.full((16,), 2.0, device=DEV)
    batches = 20 if o.quick else 200

    def run():
        for _ in range(batches):
            for _ in range(256):
                torch.add(a, b)
            torch.cuda.synchronize()
    run()
    times = []
    for _ in range(5 if o.quick else 11):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    put(m, "tiny_add_gpu_ns", statistics.median(times) / (batches * 256) * 1e9, "ns/op", "lower")
    return m


WORKLOADS = {"matmul": matmul, "d2l": d2l, "vector_add": vector_add, "conv": conv, "epoch": epoch,
             "overhead": overhead}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    o = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_gpu_bench: PyTorch sees no GPU", file=sys.stderr)
        return 1
    out = {"tool": "pytorch", "version": torch.__version__, "device": torch.cuda.get_device_name(0),
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "workloads": {}}
    for name in o.only.split(","):
        if name in WORKLOADS:
            print(f"torch_gpu_bench: running {name} ...", file=sys.stderr)
            out["workloads"][name] = {"metrics": WORKLOADS[name](o)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
