"""The measurements of bench/compare-pytorch-python/run: per-op overhead of a tiny add from Python (strata and
torch), conv2d forward + backward and a 512 x 512 product from Python (both), and an epoch of the reference network
driven from Python, by Strata and by PyTorch, against strata-train's, in alternating rounds."""
import argparse
import json
import statistics
import subprocess
import time
import timeit

# strata before torch: PyTorch 2.x's libraries take so much of the static TLS block that libstdc++, loaded again
# by the extension afterwards, fails with "cannot allocate memory in static TLS block".
try:
    import strata
    from strata import nn
    from strata.nn import functional as F
except ImportError:  # no module for this interpreter (scripts/gpu-perf cpu): strata-train against PyTorch alone
    strata = None

DATA = "/usr/share/datasets/fashion-mnist"


def add_overhead_us(lib, number):
    """Microseconds per `a + b` on two 1-element f32 CPU tensors, the best of 5 repeats (the least disturbed)."""
    a, b = lib.ones(1), lib.ones(1)
    best = min(timeit.repeat(lambda: a + b, number=number, repeat=5))
    return best / number * 1e6


def best_ms(call, number):
    """Milliseconds per call, the best of 5 repeats of `number` calls after one warm-up call."""
    call()
    return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e3


def conv_ms(lib, functional, number):
    """conv2d forward + backward (input, weight and bias gradients) from Python at strata-bench's shape: input
    [64, 32, 14, 14], weight [64, 32, 3, 3], padding 1, the gradients cleared before each call."""
    x, w = lib.randn(64, 32, 14, 14), lib.randn(64, 32, 3, 3) * 0.1
    b, g = lib.zeros(64), lib.ones(64, 64, 14, 14)
    for t in (x, w, b):
        t.requires_grad_()

    def call():
        x.grad = w.grad = b.grad = None
        functional.conv2d(x, w, b, padding=1).backward(g)
    return best_ms(call, number)


def matmul_ms(lib, number):
    """A 512 x 512 f32 product from Python."""
    a, b = lib.randn(512, 512), lib.randn(512, 512)
    return best_ms(lambda: lib.matmul(a, b), number)


def python_epoch_seconds(train_images):
    """The training loop of strata-train's reference recipe from Python, with strata-train's per-step bookkeeping
    (loss and correct counts summed on the device); returns its seconds and the test accuracy."""
    strata.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)).fuse()  # as strata-train's
    optimizer = strata.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    train_set = strata.data.FashionMNIST(DATA, train=True)
    if train_images:
        train_set = strata.data.TensorDataset(train_set.data[:train_images], train_set.targets[:train_images])
    loader = strata.data.DataLoader(train_set, batch_size=64, shuffle=True, seed=0, prefetch=2, scale_bytes=True)
    loss_sum, correct = strata.zeros(()), strata.zeros((), dtype=strata.int64)
    model.train()
    start = time.perf_counter()
    for images, labels in loader:
        logits = model(images.unsqueeze(1))
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with strata.no_grad():
            loss_sum += loss * labels.shape[0]
            correct += (logits.argmax(1) == labels).sum()
    loss_sum.item()
    return time.perf_counter() - start


def torch_epoch_seconds(torch, train_images):
    """python_epoch_seconds in PyTorch: the same network, optimizer and bookkeeping, on batches gathered from the u8
    images by a shuffled index and made f32 in [0, 1] one at a time, as Strata's loader does."""
    torch.manual_seed(0)
    tnn = torch.nn
    model = tnn.Sequential(
        tnn.Conv2d(1, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Flatten(), tnn.Linear(64 * 7 * 7, 128), tnn.ReLU(), tnn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    train_set = strata.data.FashionMNIST(DATA, train=True)
    images = torch.from_numpy(train_set.data.numpy().copy())
    labels = torch.from_numpy(train_set.targets.numpy().copy())
    if train_images:
        images, labels = images[:train_images], labels[:train_images]
    loss_sum, correct = torch.zeros(()), torch.zeros((), dtype=torch.int64)
    model.train()
    start = time.perf_counter()
    order = torch.randperm(labels.shape[0])
    for first in range(0, labels.shape[0], 64):
        index = order[first:first + 64]
        batch = images[index].unsqueeze(1).float().mul_(1.0 / 255.0)
        target = labels[index]
        logits = model(batch)
        loss = tnn.functional.cross_entropy(logits, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            loss_sum += loss * target.shape[0]
            correct += (logits.argmax(1) == target).sum()
    loss_sum.item()
    return time.perf_counter() - start


def strata_train_seconds(binary, train_images):
    args = [binary, "--epochs", "1", "--device", "cpu", "--json", "--test-images", "1000"]
    if train_images:
        args += ["--train-images", str(train_images)]
    out = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    return out["epoch_reports"][0]["seconds"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--strata-train", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="6400 training images, fewer adds")
    args = parser.parse_args()
    import torch

    number = 20_000 if args.quick else 200_000
    train_images = 6400 if args.quick else 0
    rows = {"add: strata": [], "add: torch": [], "conv: strata": [], "conv: torch": [], "matmul: strata": [],
            "matmul: torch": [], "epoch: Python": [], "epoch: strata-train": [], "epoch: torch": []}
    kernel_calls = 10 if args.quick else 50
    epochs = {"Python": lambda: python_epoch_seconds(train_images),
              "strata-train": lambda: strata_train_seconds(args.strata_train, train_images),
              "torch": lambda: torch_epoch_seconds(torch, train_images)}
    if strata is None:
        del epochs["Python"]
    for r in range(args.rounds):
        if strata is not None:
            rows["add: strata"].append(add_overhead_us(strata, number))
            rows["add: torch"].append(add_overhead_us(torch, number))
            rows["conv: strata"].append(conv_ms(strata, F, kernel_calls))
            rows["conv: torch"].append(conv_ms(torch, torch.nn.functional, kernel_calls))
            rows["matmul: strata"].append(matmul_ms(strata, kernel_calls))
            rows["matmul: torch"].append(matmul_ms(torch, kernel_calls))
        # Rotate which epoch goes first, so that none always meets a warmer (or busier) machine.
        sides = list(epochs)
        for side in sides[r % len(sides):] + sides[:r % len(sides)]:
            rows[f"epoch: {side}"].append(epochs[side]())
    # strata-train's epoch over PyTorch's, round by round (the target on AVX2: at most 0.6).
    train_ratios = [a / b for a, b in zip(rows["epoch: strata-train"], rows["epoch: torch"])]
    if strata is None:
        print(f"torch {torch.__version__}, no strata module, {args.rounds} rounds (medians)")
        print(f"{'epoch, s':<22}{statistics.median(rows['epoch: strata-train']):>12.2f}"
              f"{statistics.median(rows['epoch: torch']):>12.2f}"
              f"{statistics.median(rows['epoch: strata-train']) / statistics.median(rows['epoch: torch']):>8.2f}"
              "   (strata-train / torch from Python)")
        print("epoch ratio strata-train / torch by round: " + ", ".join(f"{x:.3f}" for x in train_ratios))
        print(json.dumps({k: [round(x, 4) for x in v] for k, v in rows.items() if v}))
        return
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"torch {torch.__version__}, strata {strata.__version__}, {args.rounds} rounds (medians)")
    print(f"{'measure':<22}{'strata':>12}{'other':>12}{'ratio':>8}")
    print(f"{'tiny add, us/op':<22}{med['add: strata']:>12.3f}{med['add: torch']:>12.3f}"
          f"{med['add: strata'] / med['add: torch']:>8.2f}   (other: torch)")
    for name, unit in (("conv", "conv2d fwd+bwd, ms"), ("matmul", "matmul 512, ms")):
        print(f"{unit:<22}{med[name + ': strata']:>12.3f}{med[name + ': torch']:>12.3f}"
              f"{med[name + ': strata'] / med[name + ': torch']:>8.2f}   (other: torch)")
    print(f"{'epoch, s':<22}{med['epoch: Python']:>12.2f}{med['epoch: strata-train']:>12.2f}"
          f"{med['epoch: Python'] / med['epoch: strata-train']:>8.2f}   (strata from Python / strata-train)")
    print(f"{'epoch, s':<22}{med['epoch: Python']:>12.2f}{med['epoch: torch']:>12.2f}"
          f"{med['epoch: Python'] / med['epoch: torch']:>8.2f}   (strata from Python / torch from Python)")
    print(f"{'epoch, s':<22}{med['epoch: strata-train']:>12.2f}{med['epoch: torch']:>12.2f}"
          f"{med['epoch: strata-train'] / med['epoch: torch']:>8.2f}   (strata-train / torch from Python)")
    print("epoch ratio strata-train / torch by round: " + ", ".join(f"{x:.3f}" for x in train_ratios))
    # Round by round, since the medians of a noisy machine can pair epochs from different rounds.
    for name, other in (("strata-train", "epoch: strata-train"), ("torch", "epoch: torch")):
        ratios = [a / b for a, b in zip(rows["epoch: Python"], rows[other])]
        print(f"epoch ratio to {name} by round: " + ", ".join(f"{x:.3f}" for x in ratios))
    print(json.dumps({k: [round(x, 4) for x in v] for k, v in rows.items()}))


if __name__ == "__main__":
    main()
