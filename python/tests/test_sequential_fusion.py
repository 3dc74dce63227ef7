"""One fusion rule: a fused Python Sequential hands its runs of C++ layers to C++'s (strata.nn's run_layers, the
function behind C++'s Sequential::forward), so it computes what strata-train's network computes, bit for bit; what
fusion may change against the layers run one by one is in Note [Fusing a Sequential's layers]
(strata/nn/layers.cpp)."""
import numpy as np
import pytest

import strata
import strata.nn as nn
from strata import _C

# The note's bound: gradients that fusion changes differ by rounding of reordered float32 sums, within this
# fraction of the gradient's largest element (measured: at most 3e-7).
ROUNDING = 1e-5


def reference_network(seed):
    strata.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def output_and_gradients(net, x, forward=None):
    for p in net.parameters():
        p.grad = None
    out = (forward or net)(x)
    (out * out).sum().backward()
    return [out.detach().numpy().copy()] + [p.grad.numpy().copy() for p in net.parameters()]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_fused_python_sequential_computes_what_cs_sequential_does_bit_for_bit(seed):
    net = reference_network(seed)
    x = strata.randn(32, 1, 28, 28)
    python = output_and_gradients(net.fuse(), x)

    # The C++ rule over C++ layers built here, sharing the network's parameters: what strata-train's fused
    # Sequential runs for the same layers.
    convs, linear = (net[0]._cpp, net[3]._cpp), net[7]._cpp
    layers = [convs[0], _C.nn.ReLU(), _C.nn.MaxPool2d(2), convs[1], _C.nn.ReLU(), _C.nn.MaxPool2d(2)]

    def cpp(x):
        return linear(_C.nn.run_layers(layers, x, True).flatten(1))

    cpp_result = output_and_gradients(net, x, cpp)
    for name, a, b in zip(["output"] + [n for n, _ in net.named_parameters()], python, cpp_result):
        assert np.array_equal(a, b), f"{name}: Python's fused Sequential differs from C++'s"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fused_against_unfused_the_outputs_are_equal_and_gradients_within_rounding(seed):
    net = reference_network(seed)
    x = strata.randn(32, 1, 28, 28)
    unfused = output_and_gradients(net, x)
    fused = output_and_gradients(net.fuse(), x)
    assert np.array_equal(fused[0], unfused[0]), "fusion changed the output"
    for (name, _), a, b in zip(net.named_parameters(), fused[1:], unfused[1:]):
        bound = ROUNDING * np.abs(b).max()
        assert np.abs(a - b).max() <= bound, f"{name}: fused and unfused differ by more than rounding"


def test_the_cpp_rule_runs_conv2d_and_relu_as_one_fused_convolution():
    strata.manual_seed(3)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    x = strata.randn(2, 3, 8, 8)
    assert net(x).grad_fn == "relu", "as written unless fused"
    assert net.fuse()(x).grad_fn == "conv2d_relu"


def test_modules_python_must_call_break_the_run_and_still_run():
    strata.manual_seed(4)
    seen = []
    relu = nn.ReLU()
    relu.register_forward_hook(lambda module, args, out: seen.append((args[0].grad_fn, out.grad_fn)))

    class MyConv(nn.Conv2d):  # a subclass may override forward: never fused, as in C++
        pass

    net = nn.Sequential(nn.Conv2d(3, 4, 3), relu, MyConv(4, 4, 3), nn.ReLU()).fuse()
    out = net(strata.randn(2, 3, 9, 9))
    assert seen == [("conv2d", "relu")], "the hooked ReLU ran in Python, after an unfused convolution"
    assert out.grad_fn == "relu", "the subclass's output went through a separate ReLU"


def test_pooling_options_that_cs_pooling_lacks_stay_in_python():
    strata.manual_seed(5)
    x = strata.randn(2, 3, 9, 9)
    for pool in (nn.MaxPool2d(2, ceil_mode=True), nn.MaxPool2d(3, stride=2, padding=1)):
        net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), pool)
        unfused = net(x).detach().numpy()
        fused = net.fuse()(x).detach().numpy()
        assert fused.shape == unfused.shape
        assert np.array_equal(fused, unfused)
