# Module containers and train/eval as PyTorch's nn tutorials use them: Sequential from an OrderedDict, ModuleList
# with append/extend, ModuleDict, ParameterList, BatchNorm1d and Dropout switching with train()/eval(), forward
# hooks, state_dict keys, and a few steps of Adam. (The Linear before BatchNorm has no bias: its gradient is 0 up
# to rounding, which Adam would scale up to steps of lr in directions that no two libraries share.)
from collections import OrderedDict

import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(5)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(OrderedDict([("fc", nn.Linear(6, 8, bias=False)), ("bn", nn.BatchNorm1d(8)),
                                               ("act", nn.LeakyReLU(0.1))]))
        self.blocks = nn.ModuleList([nn.Linear(8, 8)])
        self.blocks.extend([nn.SiLU(), nn.Dropout(0.5)])
        self.blocks.append(nn.Linear(8, 8))
        self.heads = nn.ModuleDict({"cls": nn.Linear(8, 3), "reg": nn.Linear(8, 1)})
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(3)), nn.Parameter(torch.ones(1))])

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.heads["cls"](x) * self.scales[0], self.heads["reg"](x) * self.scales[1]


net = Net()
with torch.no_grad():
    for name, p in net.named_parameters():
        if "bn" not in name and "scales" not in name:  # BatchNorm and the scales start at 1 and 0 already
            p.copy_(torch.tensor((rng.standard_normal(tuple(p.shape)) * 0.3).astype(np.float32)))
print(list(net.state_dict().keys()))
print("parameters", sum(p.numel() for p in net.parameters()), "children", [n for n, _ in net.named_children()])
activations = {}
handle = net.stem.register_forward_hook(lambda module, args, output: activations.update(stem=output.detach()))
X = torch.tensor(rng.standard_normal((16, 6)).astype(np.float32))
labels = torch.tensor(rng.integers(0, 3, 16))
target = torch.tensor(rng.standard_normal((16, 1)).astype(np.float32))
net.eval()
cls, reg = net(X)
print("eval", [round(v, 5) for v in cls[0].tolist()], round(reg[0].item(), 5), tuple(activations["stem"].shape))
print("eval is deterministic", torch.equal(net(X)[0], net(X)[0]), net.training, net.blocks[2].training)
handle.remove()
net.train()
print("train mode", net.training, net.stem.bn.training)
optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
ce, mse = nn.CrossEntropyLoss(), nn.SmoothL1Loss()
net.blocks[2].p = 0.0  # no dropout while training here, so that every library draws the same numbers
for step in range(5):
    optimizer.zero_grad()
    cls, reg = net(X)
    loss = ce(cls, labels) + mse(reg, target)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.5f}")
print("running_mean", [round(v, 5) for v in net.stem.bn.running_mean.tolist()[:4]])
print("num_batches_tracked", int(net.stem.bn.num_batches_tracked))
net.eval()
print("eval after training", [round(v, 4) for v in net(X)[0][0].tolist()])
