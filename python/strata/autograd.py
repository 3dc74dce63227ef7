"""strata.autograd: PyTorch's functional entry points to the backward pass (torch.autograd.grad and backward)."""
import strata
from strata import _C

_NO_HIGHER_ORDER = ("the backward pass is not itself recorded in Strata yet, so gradients of gradients are not "
                    "available; for a Hessian-vector product, difference two first-order gradients instead")


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, as a tuple, without touching any tensor's .grad."""
    if create_graph:
        raise NotImplementedError(f"strata.autograd.grad(create_graph=True): {_NO_HIGHER_ORDER}")
    if is_grads_batched:
        raise NotImplementedError("strata.autograd.grad(is_grads_batched=True): call grad once per row of "
                                  "grad_outputs instead")
    outputs, inputs = _as_list(outputs), _as_list(inputs)
    weights = [None] * len(outputs) if grad_outputs is None else _as_list(grad_outputs)
    result = _C._autograd_grad(outputs, weights, inputs, bool(retain_graph), bool(allow_unused) or materialize_grads)
    if materialize_grads:
        result = [strata.zeros_like(i) if g is None else g for g, i in zip(result, inputs)]
    return tuple(result)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates into the leaves the gradients of every tensor of `tensors` (torch.autograd.backward)."""
    if create_graph:
        raise NotImplementedError(f"strata.autograd.backward(create_graph=True): {_NO_HIGHER_ORDER}")
    if inputs is not None:
        raise NotImplementedError("strata.autograd.backward(inputs=...): use strata.autograd.grad(tensors, inputs) "
                                  "and add the results to .grad yourself")
    tensors = _as_list(tensors)
    weights = [None] * len(tensors) if grad_tensors is None else _as_list(grad_tensors)
    for i, (t, w) in enumerate(zip(tensors, weights)):
        # Each pass but the last keeps the graph, which the next may share.
        t.backward(w, retain_graph=bool(retain_graph) or i + 1 < len(tensors))
