"""RMSprop, Adagrad and the Python schedulers (issue 37) behave as the C++ optimizers do: parameter groups, state
dicts, C++ schedulers and closures work on them. Their numbers against PyTorch: test_completeness_reference.py."""
import pytest

import strata
from strata import nn, optim


def _model():
    strata.manual_seed(0)
    return nn.Linear(3, 2)


def _steps(model, optimizer, n):
    x = strata.ones(4, 3)
    for _ in range(n):
        optimizer.zero_grad()
        (model(x) ** 2).sum().backward()
        optimizer.step()


@pytest.mark.parametrize("make", [lambda p: optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True),
                                  lambda p: optim.Adagrad(p, lr=0.1, lr_decay=0.01)])
def test_state_dict_resumes_exactly(make):
    uninterrupted = _model()
    _steps(uninterrupted, make(uninterrupted.parameters()), 6)
    first = _model()
    opt = make(first.parameters())
    _steps(first, opt, 3)
    second = _model()
    second.load_state_dict(first.state_dict())
    resumed = make(second.parameters())
    resumed.load_state_dict(opt.state_dict())
    _steps(second, resumed, 3)
    assert second.weight.tolist() == uninterrupted.weight.tolist()
    assert "0.step" in opt.state_dict() and int(opt.state_dict()["0.step"].item()) == 3


def test_cpp_step_lr_drives_a_python_optimizer():
    opt = optim.RMSprop(_model().parameters(), lr=0.1)
    scheduler = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    opt.step()
    scheduler.step()
    assert opt.param_groups[0]["lr"] == 0.05 and opt.lr == 0.05


def test_group_weight_decay_and_lr_are_honoured():
    a, b = strata.ones(2, requires_grad=True), strata.ones(2, requires_grad=True)
    opt = optim.Adagrad([{"params": [a], "weight_decay": 1.0}, {"params": [b], "lr": 0.0}], lr=0.5)
    (a.sum() * 0 + b.sum() * 0).backward()
    opt.step()
    # a: gradient 0 + weight decay 1 * 1 -> moves by lr; b: lr 0 -> stays.
    assert a.tolist() == pytest.approx([0.5, 0.5], abs=1e-6) and b.tolist() == [1.0, 1.0]
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.0]


def test_step_with_closure_returns_its_loss():
    model = _model()
    opt = optim.RMSprop(model.parameters())

    def closure():
        opt.zero_grad()
        loss = model(strata.ones(1, 3)).sum()
        loss.backward()
        return loss

    assert isinstance(opt.step(closure), strata.Tensor)


@pytest.mark.parametrize("make", [lambda p: optim.RMSprop(p, lr=-1.0), lambda p: optim.RMSprop(p, alpha=-0.1),
                                  lambda p: optim.Adagrad(p, eps=-1.0), lambda p: optim.Adagrad(p, lr_decay=-1),
                                  lambda p: optim.RMSprop(p, foreach=True)])
def test_bad_hyperparameters_are_refused(make):
    with pytest.raises((ValueError, NotImplementedError)):
        make(_model().parameters())


def test_lambda_lr_takes_one_function_per_group():
    a, b = strata.ones(1, requires_grad=True), strata.ones(1, requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    scheduler = optim.lr_scheduler.LambdaLR(opt, [lambda e: 0.5 ** e, lambda e: 1.0 / (e + 1)])
    scheduler.step()
    scheduler.step()
    assert scheduler.get_last_lr() == pytest.approx([0.025, 1 / 3])
    with pytest.raises(ValueError):
        optim.lr_scheduler.LambdaLR(opt, [lambda e: 1.0])


def test_reduce_lr_on_plateau_state_dict_round_trips():
    opt = optim.SGD([strata.ones(1, requires_grad=True)], lr=1.0)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
    for metric in (1.0, 2.0, 3.0):
        scheduler.step(metric)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01)
    state = scheduler.state_dict()
    other = optim.lr_scheduler.ReduceLROnPlateau(opt)
    other.load_state_dict(state)
    assert other.best == 1.0 and other.patience == 0
    assert scheduler.step(strata.tensor(0.5)) is None and scheduler.best == 0.5  # a 0-d tensor metric


def test_wrong_arguments_name_the_python_class():
    with pytest.raises(TypeError, match="RMSprop"):
        optim.RMSprop(5)
    with pytest.raises(TypeError, match="Adagrad"):
        optim.Adagrad(strata.ones(2, requires_grad=True))
    with pytest.raises(TypeError, match="not an Optimizer"):
        optim.lr_scheduler.ExponentialLR(3, 0.5)
    with pytest.raises(TypeError, match="not an Optimizer"):
        optim.lr_scheduler.ReduceLROnPlateau(None)


def test_one_cycle_refuses_momentum_cycling_it_cannot_do():
    opt = optim.SGD([strata.ones(1, requires_grad=True)], lr=0.1, momentum=0.9)
    with pytest.raises(NotImplementedError, match="cycle_momentum=False"):
        optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    with pytest.raises(ValueError):
        optim.lr_scheduler.OneCycleLR(opt, max_lr=[1.0, 2.0], total_steps=10, cycle_momentum=False)
    with pytest.raises(ValueError):
        optim.lr_scheduler.SequentialLR(opt, [optim.lr_scheduler.ConstantLR(opt)], milestones=[2])
