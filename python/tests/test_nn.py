import pytest

import strata
from strata import nn
from strata.nn import functional as F


class TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(2, 8)
        self.out = nn.Linear(8, 1)
        self.scale = nn.Parameter(strata.ones(1))
        self.register_buffer("calls", strata.zeros(1))
        self.not_registered = strata.ones(3)  # a plain tensor is an attribute, as in PyTorch

    def forward(self, x):
        return self.out(strata.tanh(self.hidden(x))) * self.scale


def test_python_module_registers_by_attribute():
    m = TwoLayers()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["scale", "hidden.weight", "hidden.bias", "out.weight", "out.bias"]
    assert len(list(m.parameters())) == 5
    assert [n for n, _ in m.named_buffers()] == ["calls"]
    assert [n for n, _ in m.named_children()] == ["hidden", "out"]
    assert m.hidden.weight.shape == (8, 2)
    assert set(m.state_dict()) == {"scale", "calls", "hidden.weight", "hidden.bias", "out.weight", "out.bias"}
    assert "hidden" in repr(m) and "Linear(in_features=2" in repr(m)


def test_parameters_of_cpp_layers_are_the_layers_own_tensors():
    lin = nn.Linear(3, 2)
    x = strata.ones(4, 3)
    lin(x).sum().backward()
    assert lin.weight.grad.tolist() == [[4.0] * 3] * 2
    assert lin.bias.grad.tolist() == [4.0, 4.0]
    with strata.no_grad():
        lin.weight.zero_()
        lin.bias.fill_(1.0)
    assert lin(x).tolist() == [[1.0, 1.0]] * 4


def test_training_a_python_module_reduces_the_loss(device):
    strata.manual_seed(0)
    model = TwoLayers().to(device)
    x = strata.randn(64, 2, device=device)
    y = (x[:, 0:1] * 0.5 - x[:, 1:2]).contiguous()
    opt = strata.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    first = None
    for _ in range(100):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < first / 10


def test_sequential_and_layers_shapes():
    strata.manual_seed(1)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.BatchNorm2d(4), nn.Flatten(),
        nn.Linear(4 * 4 * 4, 10), nn.Dropout(0.5))
    out = model(strata.randn(2, 1, 8, 8))
    assert out.shape == (2, 10)
    assert "0.weight" in model.state_dict() and "3.running_mean" in model.state_dict()
    model.eval()
    assert not model[6].training and not model[6]._cpp.training
    a, b = model(strata.ones(1, 1, 8, 8)), model(strata.ones(1, 1, 8, 8))
    assert a.tolist() == b.tolist()  # dropout is off in eval mode
    assert len(model) == 7 and isinstance(model[0], nn.Conv2d)


def test_a_fused_sequential_gives_the_values_and_gradients_of_the_layers_as_written():
    strata.manual_seed(2)
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(3, 4, 3, padding=1),
                          nn.ReLU())
    x = strata.randn(2, 2, 6, 6)

    def run():
        model.zero_grad()
        out = model(x)
        (out * out).sum().backward()
        return out, [p.grad.flatten().tolist() for p in model.parameters()]

    assert not model.fused
    plain, plain_grads = run()
    assert plain.grad_fn == "relu"
    assert model.fuse() is model and model.fused
    fused, fused_grads = run()
    assert fused.grad_fn == "conv2d_relu"  # the last Conv2d + ReLU ran as one op
    assert fused.flatten().tolist() == pytest.approx(plain.flatten().tolist(), abs=1e-5)
    for a, b in zip(fused_grads, plain_grads):
        assert a == pytest.approx(b, abs=1e-4)


def test_module_to_moves_in_place_so_the_optimizer_follows(device):
    model = nn.Linear(2, 2)
    opt = strata.optim.SGD(model.parameters(), lr=0.5)
    weight = model.weight
    model.to(device)
    assert weight.device == strata.device(device) and model.weight.device == strata.device(device)
    model(strata.ones(1, 2, device=device)).sum().backward()
    before = model.weight.detach().cpu().tolist()
    opt.step()
    after = model.weight.detach().cpu().tolist()
    assert after[0][0] == pytest.approx(before[0][0] - 0.5)
    model.to(strata.float64)
    assert model.weight.dtype == strata.float64


def test_state_dict_round_trips_and_checks_keys(tmp_path):
    a, b = nn.Linear(3, 2), nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    assert b.weight.tolist() == a.weight.tolist()
    with pytest.raises(strata.InvalidArgumentError, match="missing keys: bias"):
        b.load_state_dict({"weight": a.weight})
    with pytest.raises(ValueError, match="shape"):
        b.load_state_dict({"weight": strata.ones(2, 2), "bias": strata.ones(2)})
    path = tmp_path / "model.safetensors"
    strata.save(a.state_dict(), path)
    c = nn.Linear(3, 2)
    c.load_state_dict(strata.load(path))
    assert c.weight.tolist() == a.weight.tolist()


def test_assigning_a_non_parameter_to_a_parameter_slot_is_refused():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="Parameter"):
        lin.weight = strata.ones(2, 2)
    lin2 = nn.Linear(2, 2, bias=False)
    assert lin2.bias is None and len(list(lin2.parameters())) == 1


def test_functional():
    x = strata.tensor([[1.0, 2.0, 3.0]])
    assert F.relu(strata.tensor([-1.0, 1.0])).tolist() == [0.0, 1.0]
    loss = F.cross_entropy(strata.tensor([[0.0, 0.0]]), strata.tensor([1]))
    assert loss.item() == pytest.approx(0.6931472)
    assert F.cross_entropy(x, strata.tensor([0]), reduction="none").shape == (1,)
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(x, x, reduction="avg")
    w = strata.ones(1, 1, 2, 2)
    assert F.conv2d(strata.ones(1, 1, 3, 3), w).tolist() == [[[[4.0, 4.0], [4.0, 4.0]]]]
    assert F.conv2d(strata.ones(1, 1, 3, 3), w, padding=(1, 0)).shape == (1, 1, 4, 2)
    assert F.max_pool2d(strata.arange(16, dtype=strata.float32).reshape(1, 1, 4, 4), 2).tolist() == \
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    assert F.linear(x, strata.ones(2, 3)).tolist() == [[6.0, 6.0]]


def test_optimizers_and_schedulers():
    p = nn.Parameter(strata.ones(2))
    opt = strata.optim.Adam([p], lr=0.1)
    p.sum().backward()
    opt.step()
    assert p.tolist() == pytest.approx([0.9, 0.9], abs=1e-6)
    assert "0.exp_avg" in opt.state_dict()
    sgd = strata.optim.SGD([p], lr=1.0)
    sched = strata.optim.lr_scheduler.StepLR(sgd, step_size=2, gamma=0.5)
    lrs = []
    for _ in range(4):
        sched.step()
        lrs.append(sgd.lr)
    assert lrs == [1.0, 0.5, 0.5, 0.25]
    cos = strata.optim.lr_scheduler.CosineAnnealingLR(strata.optim.AdamW([p], lr=1.0), T_max=2)
    cos.step()
    assert cos.get_last_lr() == [pytest.approx(0.5)]
    with pytest.raises(ValueError):
        strata.optim.SGD([p], lr=-1.0)
