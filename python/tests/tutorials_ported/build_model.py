# PyTorch's "Build the neural network" tutorial, with weights set from a fixed NumPy generator.
import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(0)


def init_weights(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.tensor((rng.standard_normal(tuple(p.shape)) * 0.05).astype(np.float32)))


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28 * 28, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
model = NeuralNetwork().to(device)
init_weights(model)
X = torch.tensor(rng.random((1, 28, 28)).astype(np.float32), device=device)
logits = model(X)
pred_probab = nn.Softmax(dim=1)(logits)
y_pred = pred_probab.argmax(1)
print(f"Predicted class: {y_pred.tolist()}", [f"{v:.5f}" for v in pred_probab[0].tolist()])
input_image = torch.tensor(rng.random((3, 28, 28)).astype(np.float32))
print(tuple(input_image.size()))
flatten = nn.Flatten()
flat_image = flatten(input_image)
print(tuple(flat_image.size()))
layer1 = nn.Linear(in_features=28 * 28, out_features=20)
init_weights(layer1)
hidden1 = layer1(flat_image)
print(tuple(hidden1.size()))
print(f"Before ReLU: {hidden1[0, :4].tolist()}")
hidden1 = nn.ReLU()(hidden1)
print(f"After ReLU: {hidden1[0, :4].tolist()}")
seq_modules = nn.Sequential(flatten, layer1, nn.ReLU(), nn.Linear(20, 10))
init_weights(seq_modules)
logits = seq_modules(input_image)
softmax = nn.Softmax(dim=1)
pred_probab = softmax(logits)
print("softmax rows sum", [round(v, 5) for v in pred_probab.sum(1).tolist()], pred_probab.argmax(1).tolist())
for name, param in model.named_parameters():
    values = [round(v, 5) for v in param[:2].flatten()[:2].tolist()]
    print(f"Layer: {name} | Size: {tuple(param.size())} | Values : {values}")
print(sum(p.numel() for p in model.parameters()))
