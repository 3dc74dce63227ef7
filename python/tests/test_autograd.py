import threading
import time

import pytest

import strata


def test_backward_fills_grad(device):
    x = strata.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    y = (x * x).sum()
    assert y.grad_fn is not None and x.is_leaf and not y.is_leaf
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


def test_gradients_accumulate_and_clear():
    x = strata.ones(2, requires_grad=True)
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]
    x.grad = None
    assert x.grad is None


def test_backward_with_an_explicit_gradient():
    x = strata.ones(2, requires_grad=True)
    (x * 2).backward(strata.tensor([1.0, 10.0]))
    assert x.grad.tolist() == [2.0, 20.0]


def test_matmul_gradient():
    a = strata.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = strata.tensor([[1.0], [1.0]], requires_grad=True)
    (a @ b).sum().backward()
    assert a.grad.tolist() == [[1, 1], [1, 1]]
    assert b.grad.tolist() == [[4], [6]]


def test_no_grad_records_nothing():
    x = strata.ones(2, requires_grad=True)
    with strata.no_grad():
        assert not strata.is_grad_enabled()
        y = x * 2
    assert strata.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None

    @strata.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    with strata.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad


def test_detach_and_requires_grad_setter():
    x = strata.ones(2)
    x.requires_grad = True
    assert x.requires_grad
    assert not x.detach().requires_grad


def test_backward_of_a_non_scalar_without_gradient_is_an_error():
    x = strata.ones(2, requires_grad=True)
    with pytest.raises(strata.Error):
        (x * 2).backward()


def test_backward_releases_the_gil():
    # Another Python thread runs while backward computes. With the GIL held, that thread could run only at the call's
    # edges (one switch interval, 5 ms, before and after), so a tick in the middle half of the call shows release.
    x = strata.randn(512, 512, requires_grad=True)
    y = x
    for _ in range(10):
        y = (y @ x).tanh()
    loss = y.sum()
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(time.perf_counter())

    thread = threading.Thread(target=tick)
    thread.start()
    while not ticks:
        time.sleep(0.001)
    start = time.perf_counter()
    loss.backward()
    end = time.perf_counter()
    done.set()
    thread.join()
    assert x.grad.shape == (512, 512)
    span = end - start
    assert span > 0.02, "backward was too quick to tell"
    assert any(start + span / 4 < t < end - span / 4 for t in ticks)
