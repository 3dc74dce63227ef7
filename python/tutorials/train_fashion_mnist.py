"""Training strata-train's reference network on Fashion-MNIST for one epoch, from Python: the same layers, seed,
order of batches and recipe (SGD, lr 0.01, momentum 0.9, batch 64), so it reaches the same test accuracy.
Run from the build tree: PYTHONPATH=build/default/python python3 <this> [--epochs N] [--data DIR]."""
import argparse

import strata
from strata import nn
from strata.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
args = parser.parse_args()
device = "cuda" if strata.cuda.is_available() else "cpu"

strata.manual_seed(0)  # strata-train's default seed: the same initial weights
model = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)).fuse().to(device)  # as strata-train's
optimizer = strata.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
# Images arrive as f32 in [0, 1] (scale_bytes, torchvision's ToTensor), in strata-train's order (seed 0, by epoch).
train = strata.data.DataLoader(strata.data.FashionMNIST(args.data, train=True), batch_size=64, shuffle=True,
                               seed=0, prefetch=2, device=device, scale_bytes=True)
test_set = strata.data.FashionMNIST(args.data, train=False)
test = strata.data.DataLoader(test_set, batch_size=1000, device=device, scale_bytes=True)

for epoch in range(args.epochs):
    train.set_epoch(epoch)  # the shuffled order depends on (seed, epoch) only
    model.train()
    for images, labels in train:
        loss = F.cross_entropy(model(images.unsqueeze(1)), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    correct = strata.zeros((), dtype=strata.int64, device=device)  # summed on the device, read once
    with strata.no_grad():
        for images, labels in test:
            correct += (model(images.unsqueeze(1)).argmax(1) == labels).sum()
    accuracy = 100.0 * correct.item() / len(test_set)
    print(f"epoch {epoch + 1}: loss {loss.item():.4f}, test accuracy {accuracy:.2f} %")
