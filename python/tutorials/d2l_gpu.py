"""The GPU chapter of Dive into Deep Learning with Strata: where tensors live, copies that are explicit, a model on a
device, and two devices at once. Runs on the CPU when there is no GPU."""
import threading
import time

import strata
from strata import nn


def try_gpu(i=0):
    """d2l's try_gpu: the i-th GPU if it exists, else the CPU."""
    return strata.device(f"cuda:{i}") if strata.cuda.device_count() > i else strata.device("cpu")


def two_devices_at_once():
    # d2l, "Automatic Parallelism": the same work on two devices, one after the other and then at once. Two GPUs
    # when there are, else two virtual CPU devices (STRATA_CPU_DEVICES=2), which share the cores: no speed-up then.
    if strata.cuda.device_count() >= 2:
        two = [strata.device("cuda:0"), strata.device("cuda:1")]
    elif strata.cpu_device_count() >= 2:
        two = [strata.device("cpu:0"), strata.device("cpu:1")]
    else:
        print("Two devices at once: skipped, there is one device (STRATA_CPU_DEVICES=2 makes two on the CPU)")
        return

    def run(device):  # d2l: run(x) = [x.mm(x) for _ in range(50)]
        x = strata.rand(200, 200, device=device)
        y = x
        for _ in range(50):
            y = (x @ y) / 200.0
        strata.synchronize(device)

    def seconds(fn):
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    for d in two:
        run(d)

    def at_once():
        # matmul releases the GIL, so the two host threads drive their devices concurrently.
        second = threading.Thread(target=run, args=(two[1],))
        second.start()
        run(two[0])
        second.join()

    print(f"Two devices ({two[0]}, {two[1]}): one after the other {seconds(lambda: [run(d) for d in two]):.4f} s, "
          f"at once {seconds(at_once):.4f} s")


def main():
    gpu = try_gpu()
    print(f"CUDA devices: {strata.cuda.device_count()}; using {gpu}")
    if not strata.cuda.is_available():
        print(f"  ({strata.cuda.unavailable_reason()})")

    x = strata.ones(2, 3, device=gpu)  # d2l: X = torch.ones(2, 3, device=try_gpu())
    print("X =", x)
    y = strata.rand(2, 3, device=gpu)
    z = x.copy_to(gpu)  # copy_to always allocates; to() is the tensor itself when it is already there
    print("Z shares storage with X:", z.shares_storage(x))
    print(f"Z.to({gpu}) is Z itself:", z.to(gpu).shares_storage(z))
    print("Y + Z =", y + z)

    if gpu.type == "cuda":  # mixing devices is an error, never a hidden copy
        try:
            x + strata.ones(2, 3)
        except strata.DeviceMismatchError as e:
            print("DeviceMismatchError:", e)

    net = nn.Sequential(nn.Linear(3, 1)).to(gpu)  # d2l: net = net.to(device=try_gpu())
    print("net(X) =", net(x))
    print("net[0].weight.device:", net[0].weight.device)

    two_devices_at_once()
    c = strata.transfer_counters()
    print(f"host->device copies: {c['host_to_device_copies']}, device->host copies: {c['device_to_host_copies']}, "
          f"synchronisations: {c['synchronizations']}")


if __name__ == "__main__":
    main()
