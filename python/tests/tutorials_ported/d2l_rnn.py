# Dive into Deep Learning, "Recurrent neural networks" (concise implementations): a character-level language model
# on a short text with nn.RNN, then nn.GRU and nn.LSTM, one-hot inputs, gradient clipping and perplexity, with
# weights from a fixed NumPy generator instead of random initialisation.
import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

text = "the time machine by h g wells " * 8
vocab = sorted(set(text))
corpus = torch.tensor([vocab.index(ch) for ch in text])
num_steps, batch_size, num_hiddens = 10, 4, 16
rng = np.random.default_rng(6)


class RNNModel(nn.Module):
    def __init__(self, rnn_layer, vocab_size):
        super().__init__()
        self.rnn = rnn_layer
        self.vocab_size = vocab_size
        self.num_hiddens = self.rnn.hidden_size
        self.num_directions = 2 if self.rnn.bidirectional else 1
        self.linear = nn.Linear(self.num_hiddens * self.num_directions, self.vocab_size)

    def forward(self, inputs, state):
        X = F.one_hot(inputs.T.long(), self.vocab_size)
        X = X.to(torch.float32)
        Y, state = self.rnn(X, state)
        output = self.linear(Y.reshape((-1, Y.shape[-1])))
        return output, state

    def begin_state(self, batch_size=1):
        shape = (self.num_directions * self.rnn.num_layers, batch_size, self.num_hiddens)
        if not isinstance(self.rnn, nn.LSTM):
            return torch.zeros(shape)
        return (torch.zeros(shape), torch.zeros(shape))


def batches():
    starts = list(range(0, len(corpus) - num_steps - 1, num_steps))[:batch_size * 5]
    for i in range(0, len(starts), batch_size):
        X = torch.stack([corpus[s:s + num_steps] for s in starts[i:i + batch_size]])
        Y = torch.stack([corpus[s + 1:s + num_steps + 1] for s in starts[i:i + batch_size]])
        yield X, Y


def predict(prefix, num_preds, net):
    state = net.begin_state(batch_size=1)
    outputs = [vocab.index(prefix[0])]
    get_input = lambda: torch.tensor([outputs[-1]]).reshape((1, 1))  # noqa: E731
    for y in prefix[1:]:
        _, state = net(get_input(), state)
        outputs.append(vocab.index(y))
    for _ in range(num_preds):
        y, state = net(get_input(), state)
        outputs.append(int(y.argmax(dim=1).reshape(1)))
    return "".join(vocab[i] for i in outputs)


def train(net, name, epochs=6, lr=1.0):
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.tensor((rng.standard_normal(tuple(p.shape)) * 0.2).astype(np.float32)))
    loss = nn.CrossEntropyLoss()
    updater = torch.optim.SGD(net.parameters(), lr)
    for epoch in range(epochs):
        total, count = 0.0, 0
        for X, Y in batches():
            state = net.begin_state(batch_size=X.shape[0])
            y_hat, state = net(X, state)
            l = loss(y_hat, Y.T.reshape(-1).long()).mean()
            updater.zero_grad()
            l.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            updater.step()
            total, count = total + l.item() * Y.numel(), count + Y.numel()
        print(f"{name} epoch {epoch + 1}: perplexity {math.exp(total / count):.4f}")
    print(f"{name}: {predict('time ', 10, net)!r}")


train(RNNModel(nn.RNN(len(vocab), num_hiddens), len(vocab)), "rnn")
train(RNNModel(nn.GRU(len(vocab), num_hiddens), len(vocab)), "gru")
train(RNNModel(nn.LSTM(len(vocab), num_hiddens, num_layers=2), len(vocab)), "lstm")
train(RNNModel(nn.GRU(len(vocab), num_hiddens, bidirectional=True), len(vocab)), "bigru", epochs=2)
