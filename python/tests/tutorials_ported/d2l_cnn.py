# Dive into Deep Learning, "Convolutional neural networks": corr2d and edge detection, learning a kernel, padding
# and stride arithmetic, multiple channels, pooling, and LeNet (Sigmoid, AvgPool2d, xavier_uniform_ replaced by
# fixed values) trained for a few steps on synthetic 28x28 images.
import numpy as np
import torch
from torch import nn


def corr2d(X, K):
    h, w = K.shape
    Y = torch.zeros((X.shape[0] - h + 1, X.shape[1] - w + 1))
    for i in range(Y.shape[0]):
        for j in range(Y.shape[1]):
            Y[i, j] = (X[i:i + h, j:j + w] * K).sum()
    return Y


X = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]])
K = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
print("corr2d", corr2d(X, K).tolist())
X = torch.ones((6, 8))
X[:, 2:6] = 0
K = torch.tensor([[1.0, -1.0]])
Y = corr2d(X, K)
print("edges", Y.tolist())
conv2d = nn.Conv2d(1, 1, kernel_size=(1, 2), bias=False)
with torch.no_grad():
    conv2d.weight.copy_(torch.tensor([[[[0.5, 0.25]]]]))
X, Y = X.reshape((1, 1, 6, 8)), Y.reshape((1, 1, 6, 7))
for i in range(10):
    Y_hat = conv2d(X)
    l = (Y_hat - Y) ** 2
    conv2d.zero_grad()
    l.sum().backward()
    with torch.no_grad():
        conv2d.weight[:] -= 3e-2 * conv2d.weight.grad
    if (i + 1) % 2 == 0:
        print(f"epoch {i + 1}, loss {l.sum():.3f}")
print("learned kernel", [round(v, 4) for v in conv2d.weight.reshape((1, 2)).tolist()[0]])


def comp_conv2d(conv2d, X):
    X = X.reshape((1, 1) + tuple(X.shape))
    return conv2d(X).reshape(tuple(conv2d(X).shape[2:]))


X = torch.rand(size=(8, 8))
print(tuple(comp_conv2d(nn.Conv2d(1, 1, kernel_size=3, padding=1), X).shape))
print(tuple(comp_conv2d(nn.Conv2d(1, 1, kernel_size=(5, 3), padding=(2, 1)), X).shape))
print(tuple(comp_conv2d(nn.Conv2d(1, 1, kernel_size=3, padding=1, stride=2), X).shape))
print(tuple(comp_conv2d(nn.Conv2d(1, 1, kernel_size=(3, 5), padding=(0, 1), stride=(3, 4)), X).shape))
print(tuple(comp_conv2d(nn.Conv2d(1, 1, kernel_size=4, padding="same"), X).shape))
X = torch.arange(16, dtype=torch.float32).reshape((1, 1, 4, 4))
print("pool", nn.MaxPool2d(3)(X).tolist(), nn.MaxPool2d(3, padding=1, stride=2)(X).tolist())
print("ceil", nn.MaxPool2d(3, stride=2, ceil_mode=True)(X).tolist())
print("avg", nn.AvgPool2d(2)(X).tolist())
X = torch.cat((X, X + 1), 1)
print("pool channels", tuple(nn.MaxPool2d(3, padding=1, stride=2)(X).shape))

rng = np.random.default_rng(3)
net = nn.Sequential(
    nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.Sigmoid(),
    nn.AvgPool2d(kernel_size=2, stride=2),
    nn.Conv2d(6, 16, kernel_size=5), nn.Sigmoid(),
    nn.AvgPool2d(kernel_size=2, stride=2),
    nn.Flatten(),
    nn.Linear(16 * 5 * 5, 120), nn.Sigmoid(),
    nn.Linear(120, 84), nn.Sigmoid(),
    nn.Linear(84, 10))
with torch.no_grad():
    for p in net.parameters():
        bound = (6 / sum(p.shape[:2])) ** 0.5 if p.dim() > 1 else 0.0
        p.copy_(torch.tensor(rng.uniform(-bound, bound, tuple(p.shape)).astype(np.float32)))
X = torch.tensor(rng.random((1, 1, 28, 28)).astype(np.float32))
for layer in net:
    X = layer(X)
    print(layer.__class__.__name__, "output shape: \t", tuple(X.shape))
images = torch.tensor(rng.random((32, 1, 28, 28)).astype(np.float32))
labels = torch.tensor(rng.integers(0, 10, 32))
optimizer = torch.optim.SGD(net.parameters(), lr=0.9)
loss = nn.CrossEntropyLoss()
for step in range(5):
    optimizer.zero_grad()
    l = loss(net(images), labels)
    l.backward()
    optimizer.step()
    print(f"step {step}, loss {l.item():.5f}")
