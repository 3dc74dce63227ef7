"""Parameter groups as PyTorch's list of dicts, gradient clipping, ignore_index, and to(device, dtype)."""
import math

import pytest

import strata
from strata import nn
from strata.nn import functional as F


def leaf(value, grad=1.0):
    p = nn.Parameter(strata.tensor([value]))
    p.grad = strata.tensor([grad])
    return p


def test_groups_have_their_own_lr_and_weight_decay():
    a, b, c = leaf(1.0), leaf(1.0), leaf(1.0)
    sgd = strata.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}, {"params": c, "weight_decay": 1.0}], lr=0.1)
    groups = sgd.param_groups
    assert [g["lr"] for g in groups] == [0.1, 0.5, 0.1]
    assert "weight_decay" not in groups[0] and groups[2]["weight_decay"] == 1.0
    assert groups[1]["params"][0] is not None and len(groups[2]["params"]) == 1
    sgd.step()
    assert a.tolist() == pytest.approx([0.9]) and b.tolist() == pytest.approx([0.5])
    assert c.tolist() == pytest.approx([0.8])


def test_setting_a_groups_lr_changes_the_optimizer():
    a, b = leaf(1.0), leaf(1.0)
    adam = strata.optim.AdamW([{"params": [a]}, {"params": [b], "weight_decay": 0.0}], lr=0.1)
    for group in adam.param_groups:
        group["lr"] = group["lr"] * 0.1
    assert [g["lr"] for g in adam.param_groups] == pytest.approx([0.01, 0.01])
    adam.param_groups[0]["weight_decay"] = 0.5
    assert adam.param_groups[0]["weight_decay"] == 0.5
    with pytest.raises(KeyError):
        adam.param_groups[0]["momentum"] = 0.9


def test_schedulers_scale_every_group():
    sgd = strata.optim.SGD([{"params": [leaf(0.0)]}, {"params": [leaf(0.0)], "lr": 1.0}], lr=0.1)
    sched = strata.optim.lr_scheduler.StepLR(sgd, step_size=1, gamma=0.5)
    assert sched.base_lrs == [0.1, 1.0]
    sched.step()
    assert sched.get_last_lr() == pytest.approx([0.05, 0.5])
    assert [g["lr"] for g in sgd.param_groups] == pytest.approx([0.05, 0.5])
    assert "lr.1" in sgd.state_dict() and "base_lr.1" in sched.state_dict()


def test_bad_groups_are_refused():
    with pytest.raises(ValueError, match="momentum"):
        strata.optim.SGD([{"params": [leaf(0.0)], "momentum": 0.9}], lr=0.1)
    with pytest.raises(TypeError):
        strata.optim.SGD([leaf(0.0), {"params": [leaf(0.0)]}], lr=0.1)


def test_clip_grad_norm_and_value():
    a, b = leaf(0.0, 3.0), leaf(0.0, 4.0)
    total = nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert total.item() == pytest.approx(5.0)
    assert a.grad.item() == pytest.approx(0.6, abs=1e-5) and b.grad.item() == pytest.approx(0.8, abs=1e-5)
    nn.utils.clip_grad_value_(a, 0.5)
    assert a.grad.item() == 0.5


def test_cross_entropy_ignores_minus_100():
    x = strata.tensor([[1.0, 2.0, 3.0], [1.0, 0.0, -1.0]], requires_grad=True)
    loss = F.cross_entropy(x, strata.tensor([2, -100]))
    expected = -(3.0 - math.log(math.exp(1) + math.exp(2) + math.exp(3)))
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert x.grad.tolist()[1] == [0.0, 0.0, 0.0]
    assert nn.CrossEntropyLoss(ignore_index=2)(x, strata.tensor([2, 0])).item() == pytest.approx(
        F.cross_entropy(x[1:], strata.tensor([0])).item(), rel=1e-5)


def test_to_device_and_dtype_in_one_call(device):
    t = strata.tensor([1.5, -2.0]).to(device, strata.float64)
    assert t.dtype == strata.float64 and t.device == strata.device(device)
    assert t.tolist() == [1.5, -2.0]


def test_add_param_group_steps_the_new_group():
    a, b = leaf(1.0), leaf(1.0)
    sgd = strata.optim.SGD([a], lr=0.1)
    sgd.add_param_group({"params": [b], "lr": 0.5})
    assert [g["lr"] for g in sgd.param_groups] == pytest.approx([0.1, 0.5])
    sgd.step()
    assert a.tolist() == pytest.approx([0.9]) and b.tolist() == pytest.approx([0.5])
    with pytest.raises(ValueError, match="same tensor"):
        sgd.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="momentum"):
        sgd.add_param_group({"params": [leaf(0.0)], "momentum": 0.9})
    assert len(sgd.param_groups) == 2
