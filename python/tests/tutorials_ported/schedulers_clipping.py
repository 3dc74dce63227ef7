# Learning-rate schedules and gradient clipping as PyTorch's tutorials use them: StepLR, MultiStepLR,
# ExponentialLR, LambdaLR, CosineAnnealingLR and ReduceLROnPlateau on SGD, Adam, RMSprop and Adagrad, with
# clip_grad_norm_ and clip_grad_value_ in the loop.
import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(4)
X = torch.tensor(rng.standard_normal((64, 5)).astype(np.float32))
y = X @ torch.tensor([[1.0], [-2.0], [0.5], [0.0], [3.0]]) + 0.1


def fresh_model():
    model = nn.Linear(5, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.1, 0.2, -0.1, 0.3, 0.0]]))
        model.bias.fill_(0.5)
    return model


def run(name, make_optimizer, make_scheduler, epochs=8, clip=None, plateau=False):
    model = fresh_model()
    optimizer = make_optimizer(model.parameters())
    scheduler = make_scheduler(optimizer)
    loss_fn = nn.MSELoss()
    for epoch in range(epochs):
        for i in range(0, 64, 16):
            optimizer.zero_grad()
            loss = loss_fn(model(X[i:i + 16]), y[i:i + 16])
            loss.backward()
            if clip == "norm":
                norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            elif clip == "value":
                nn.utils.clip_grad_value_(model.parameters(), clip_value=0.5)
            optimizer.step()
        with torch.no_grad():
            epoch_loss = loss_fn(model(X), y).item()
        scheduler.step(epoch_loss) if plateau else scheduler.step()
        print(f"{name} epoch {epoch} loss {epoch_loss:.6f} lr {optimizer.param_groups[0]['lr']:.6f}")
    if clip == "norm":
        print(f"{name} last norm {float(norm):.6f}")


sched = torch.optim.lr_scheduler
run("step", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), lambda o: sched.StepLR(o, step_size=3, gamma=0.5))
run("multistep", lambda p: torch.optim.SGD(p, lr=0.05), lambda o: sched.MultiStepLR(o, milestones=[2, 5]),
    clip="norm")
run("exponential", lambda p: torch.optim.Adam(p, lr=0.1), lambda o: sched.ExponentialLR(o, gamma=0.8))
run("lambda", lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5),
    lambda o: sched.LambdaLR(o, lambda epoch: 0.9 ** epoch), clip="value")
run("cosine", lambda p: torch.optim.Adagrad(p, lr=0.5), lambda o: sched.CosineAnnealingLR(o, T_max=8))
run("plateau", lambda p: torch.optim.SGD(p, lr=0.3), lambda o: sched.ReduceLROnPlateau(o, factor=0.5, patience=0),
    plateau=True)
