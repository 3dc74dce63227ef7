# Dive into Deep Learning, "Multilayer perceptrons": the MLP from scratch (its relu, parameters with
# requires_grad, a hand-written SGD update) and the concise one (nn.Sequential, init.normal_ replaced by fixed
# values), on a small synthetic data set instead of Fashion-MNIST.
import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(2)
X_np = rng.standard_normal((128, 20)).astype(np.float32)
y_np = (X_np[:, :5].sum(1) > 0).astype(np.int64) + 2 * (X_np[:, 5:10].sum(1) > 0)
X, y = torch.tensor(X_np), torch.tensor(y_np)
num_inputs, num_outputs, num_hiddens = 20, 4, 32


def fixed(*shape, scale=0.1):
    return torch.tensor((rng.standard_normal(shape) * scale).astype(np.float32))


W1 = nn.Parameter(fixed(num_inputs, num_hiddens))
b1 = nn.Parameter(torch.zeros(num_hiddens))
W2 = nn.Parameter(fixed(num_hiddens, num_outputs))
b2 = nn.Parameter(torch.zeros(num_outputs))
params = [W1, b1, W2, b2]


def relu(X):
    a = torch.zeros_like(X)
    return torch.max(X, a)


def net(X):
    X = X.reshape((-1, num_inputs))
    H = relu(X @ W1 + b1)
    return H @ W2 + b2


def accuracy(y_hat, y):
    return float(y_hat.argmax(axis=1).type(y.dtype).eq(y).float().mean())


loss = nn.CrossEntropyLoss(reduction="none")
for epoch in range(5):
    for i in range(0, 128, 16):
        l = loss(net(X[i:i + 16]), y[i:i + 16])
        l.mean().backward()
        with torch.no_grad():
            for param in params:
                param -= 0.5 * param.grad
                param.grad.zero_()
    with torch.no_grad():
        print(f"scratch epoch {epoch + 1}, loss {float(loss(net(X), y).mean()):f}, acc {accuracy(net(X), y):.4f}")

model = nn.Sequential(nn.Flatten(), nn.Linear(num_inputs, num_hiddens), nn.ReLU(), nn.Dropout(0.0),
                      nn.Linear(num_hiddens, num_outputs))


def init_weights(m):
    if type(m) == nn.Linear:
        with torch.no_grad():
            m.weight.copy_(fixed(*m.weight.shape, scale=0.01))
        nn.init.zeros_(m.bias)


model.apply(init_weights)
trainer = torch.optim.SGD(model.parameters(), lr=0.5, weight_decay=1e-4)
for epoch in range(5):
    model.train()
    for i in range(0, 128, 16):
        trainer.zero_grad()
        l = loss(model(X[i:i + 16]), y[i:i + 16]).mean()
        l.backward()
        trainer.step()
    model.eval()
    with torch.no_grad():
        print(f"concise epoch {epoch + 1}, loss {float(loss(model(X), y).mean()):f}, acc {accuracy(model(X), y):.4f}")
