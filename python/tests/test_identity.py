"""One Python object per tensor, as in PyTorch (issue 37, item 6): user code such as D2L's GPU chapter tests
`Z.to(device) is Z`."""
import gc
import weakref

import strata
from strata import nn


def test_ops_that_return_the_tensor_itself_return_the_same_object():
    t = strata.ones(2, 3)
    assert t.to("cpu") is t
    assert t.to(strata.float32) is t
    assert t.float() is t
    assert t.contiguous() is t
    assert t.cpu() is t
    assert t.t().contiguous() is not t


def test_grad_is_the_same_object_while_it_lives():
    w = strata.ones(2, requires_grad=True)
    (w * 2).sum().backward()
    g = w.grad
    assert w.grad is g
    w.grad = None
    assert w.grad is None


def test_a_layers_parameters_are_the_parameter_objects():
    lin = nn.Linear(2, 2)
    assert list(lin.parameters())[0] is lin.weight
    assert lin._cpp.named_parameters()[0][1] is lin.weight


def test_a_dead_object_is_replaced_by_a_new_one():
    w = strata.ones(2, requires_grad=True)
    (w * 2).sum().backward()
    first = weakref.ref(w.grad)
    gc.collect()
    assert first() is None  # nobody holds the first object: it is gone, not kept alive by the bindings
    g = w.grad
    assert g.tolist() == [2.0, 2.0] and w.grad is g
