"""strata.autocast and strata.amp.GradScaler as PyTorch's torch.autocast and torch.amp.GradScaler."""
import math
import threading

import pytest

import strata
import strata.nn.functional as F


def test_autocast_runs_products_low_and_softmax_norms_losses_in_f32():
    x, w = strata.randn(4, 8), strata.randn(3, 8)
    with strata.autocast("cpu"):
        assert strata.is_autocast_enabled("cpu") and not strata.is_autocast_enabled("cuda")
        assert strata.get_autocast_dtype("cpu") == strata.bfloat16
        assert F.linear(x, w).dtype == strata.bfloat16
        assert (x @ w.t()).dtype == strata.bfloat16
        y = F.linear(x, w)
        assert F.softmax(y, dim=1).dtype == strata.float32
        assert F.layer_norm(y, (3,)).dtype == strata.float32
        assert F.cross_entropy(y, strata.tensor([0, 1, 2, 0])).dtype == strata.float32
        assert (y + x[:, :3]).dtype == strata.float32  # binary ops promote
        with strata.autocast("cpu", enabled=False):
            assert F.linear(x, w).dtype == strata.float32
        with strata.amp.autocast("cpu", dtype=strata.float16):
            assert F.linear(x, w).dtype == strata.float16
        assert F.linear(x, w).dtype == strata.bfloat16
    assert not strata.is_autocast_enabled("cpu")
    assert F.linear(x, w).dtype == strata.float32


def test_autocast_as_a_decorator_is_per_thread_and_refuses_bad_arguments():
    @strata.autocast("cpu")
    def forward(x, w):
        return F.linear(x, w)

    x, w = strata.randn(2, 2), strata.randn(2, 2)
    assert forward(x, w).dtype == strata.bfloat16
    assert F.linear(x, w).dtype == strata.float32
    seen = []
    with strata.autocast("cpu"):
        t = threading.Thread(target=lambda: seen.append(F.linear(x, w).dtype))
        t.start()
        t.join()
    assert seen == [strata.float32]
    with pytest.raises(strata.InvalidArgumentError, match="float64|f64"):
        strata.autocast("cpu", dtype=strata.float64)
    with pytest.raises(strata.InvalidArgumentError, match="'tpu'"):
        strata.autocast("tpu")
    assert not strata.is_autocast_enabled("cpu")


def test_gradients_flow_to_f32_parameters_under_autocast():
    strata.manual_seed(0)
    model = strata.nn.Sequential(strata.nn.Linear(16, 32), strata.nn.ReLU(), strata.nn.Linear(32, 4))
    x, target = strata.randn(64, 16), strata.randint(0, 4, (64,))
    opt = strata.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = strata.amp.GradScaler("cpu")
    losses = []
    for _ in range(30):
        opt.zero_grad()
        with strata.autocast("cpu", dtype=strata.bfloat16):
            loss = F.cross_entropy(model(x), target)
        assert loss.dtype == strata.float32
        scaler.scale(loss).backward()
        assert all(p.grad.dtype == strata.float32 for p in model.parameters())
        scaler.unscale_(opt)
        strata.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        assert scaler.step(opt) is True
        scaler.update()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert scaler.get_scale() == 65536.0 and scaler._get_growth_tracker() == 30


def test_grad_scaler_skips_overflowing_steps_and_keeps_pytorch_rules():
    p = strata.tensor([1.0, -2.0], requires_grad=True)
    opt = strata.optim.SGD([p], lr=1.0)
    scaler = strata.amp.GradScaler(init_scale=8.0, growth_interval=2)
    assert scaler.get_growth_factor() == 2.0 and scaler.get_backoff_factor() == 0.5
    scaler.scale((p * strata.tensor([math.inf, 1.0])).sum()).backward()
    assert scaler.step(opt) is False
    scaler.update()
    assert p.tolist() == [1.0, -2.0] and scaler.get_scale() == 4.0
    for _ in range(2):
        opt.zero_grad()
        scaler.scale((p * strata.tensor([0.5, 0.25])).sum()).backward()
        assert scaler.step(opt) is True
        scaler.update()
    assert scaler.get_scale() == 8.0
    assert p.tolist() == [0.0, -2.5]
    with pytest.raises(strata.InvalidArgumentError, match="no optimizer was unscaled"):
        scaler.update()
    state = scaler.state_dict()
    assert state == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2,
                     "_growth_tracker": 0}
    other = strata.amp.GradScaler()
    other.load_state_dict(state)
    assert other.get_scale() == 8.0 and other.get_growth_interval() == 2
    with pytest.raises(strata.InvalidArgumentError, match="init_scale"):
        strata.amp.GradScaler(init_scale=0.0)
    off = strata.amp.GradScaler(enabled=False)
    assert off.scale(p.sum()) is not None and off.get_scale() == 1.0 and off.state_dict() == {}


def test_grad_scaler_steps_a_python_optimizer():
    p = strata.tensor([1.0], requires_grad=True)
    opt = strata.optim.RMSprop([p], lr=0.1)
    scaler = strata.amp.GradScaler()
    scaler.scale((p * p).sum()).backward()
    assert scaler.step(opt) is True
    assert p.item() < 1.0
