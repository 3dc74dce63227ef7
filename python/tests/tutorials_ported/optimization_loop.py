# PyTorch's "Optimizing model parameters" tutorial: the train and test loops, on a small synthetic data set (ten
# classes of 8x8 images) instead of the FashionMNIST download, with weights from a fixed NumPy generator.
import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(1)
centers = rng.standard_normal((10, 64)).astype(np.float32)
labels = rng.integers(0, 10, 256)
images = (centers[labels] + 0.5 * rng.standard_normal((256, 64))).astype(np.float32).reshape(256, 1, 8, 8)
X_train, y_train = torch.tensor(images[:192]), torch.tensor(labels[:192])
X_test, y_test = torch.tensor(images[192:]), torch.tensor(labels[192:])


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                                               nn.Linear(32, 10))

    def forward(self, x):
        return self.linear_relu_stack(self.flatten(x))


model = NeuralNetwork()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor((rng.standard_normal(tuple(p.shape)) * 0.2).astype(np.float32)))

learning_rate = 1e-1
batch_size = 32
epochs = 4
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)


def train_loop(model, loss_fn, optimizer):
    size = len(X_train)
    model.train()
    for batch in range(size // batch_size):
        X = X_train[batch * batch_size:(batch + 1) * batch_size]
        y = y_train[batch * batch_size:(batch + 1) * batch_size]
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if batch % 2 == 0:
            loss, current = loss.item(), batch * batch_size + len(X)
            print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")


def test_loop(model, loss_fn):
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        pred = model(X_test)
        test_loss = loss_fn(pred, y_test).item()
        correct = (pred.argmax(1) == y_test).type(torch.float).sum().item()
    correct /= len(X_test)
    print(f"Test Error: \n Accuracy: {(100 * correct):>0.1f}%, Avg loss: {test_loss:>8f} \n")


for t in range(epochs):
    print(f"Epoch {t + 1}\n-------------------------------")
    train_loop(model, loss_fn, optimizer)
    test_loop(model, loss_fn)
print("Done!")
