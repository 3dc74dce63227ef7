"""Cases of scaled_dot_product_attention, written once against PyTorch's API so that the same code runs
with `torch` and with `strata`: each case takes the library and returns named arrays (values and gradients).

    # re-record the reference with a Python that has PyTorch 2.15 and NumPy 1.24 (the inputs' generator):
    python3 python/tests/attention_cases.py --record
writes attention_reference.json beside this file; test_attention.py compares Strata with it.
"""

import numpy as np

from pytorch_reference import CaseSet, data  # noqa: F401 (the cases' helpers)

CASE_SET = CaseSet("attention_reference.json")
CASES, REFERENCE, case = CASE_SET.cases, CASE_SET.reference, CASE_SET.case


def sdpa_grads(lib, q, k, v, **kwargs):
    """The output of scaled_dot_product_attention and the gradients of q, k and v for a fixed upstream gradient."""
    leaves = [lib.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = lib.nn.functional.scaled_dot_product_attention(*leaves, **kwargs)
    out.backward(lib.tensor(data(*out.shape, seed=99)))
    result = {"value": out.detach().numpy()}
    for name, t in zip("qkv", leaves):
        result[f"grad_{name}"] = t.grad.numpy()
    return result


def prefixed(prefix, arrays):
    return {f"{prefix}.{key}": value for key, value in arrays.items()}


@case
def plain(lib):
    q, k, v = data(2, 3, 5, 4, seed=1), data(2, 3, 7, 4, seed=2), data(2, 3, 7, 3, seed=3)
    return {**prefixed("default", sdpa_grads(lib, q, k, v)),
            **prefixed("scale", sdpa_grads(lib, q, k, v, scale=0.5)),
            **prefixed("two_d", sdpa_grads(lib, q[0, 0], k[0, 0], v[0, 0]))}


@case
def causal(lib):
    out = {}
    for name, (L, S) in {"square": (6, 6), "more_queries": (7, 4), "more_keys": (4, 9)}.items():
        q, k, v = data(2, L, 4, seed=L), data(2, S, 4, seed=10 + S), data(2, S, 5, seed=20 + S)
        out.update(prefixed(name, sdpa_grads(lib, q, k, v, is_causal=True)))
    return out


@case
def masks(lib):
    q, k, v = data(2, 3, 5, 4, seed=4), data(2, 3, 7, 4, seed=5), data(2, 3, 7, 3, seed=6)
    allowed = np.random.default_rng(7).random((5, 7)) > 0.4
    allowed[:, 0] = True
    allowed[3] = False  # a query that no key may attend to
    additive = data(2, 1, 5, 7, seed=8)
    additive[:, :, 1, 2:] = -np.inf
    padding = np.ones((2, 3, 1, 7), dtype=bool)
    padding[1, :, :, 5:] = False
    return {**prefixed("bool", sdpa_grads(lib, q, k, v, attn_mask=lib.tensor(allowed))),
            **prefixed("additive", sdpa_grads(lib, q, k, v, attn_mask=lib.tensor(additive))),
            **prefixed("key_padding", sdpa_grads(lib, q, k, v, attn_mask=lib.tensor(padding)))}


@case
def shapes(lib):
    # Across the CPU kernel's 64 x 64 blocks, with E = 1; batch dims that broadcast.
    return {**prefixed("blocks_causal", sdpa_grads(lib, data(1, 70, 1, seed=30), data(1, 130, 1, seed=31),
                                                   data(1, 130, 2, seed=32), is_causal=True)),
            **prefixed("blocks", sdpa_grads(lib, data(130, 3, seed=33), data(65, 3, seed=34), data(65, 2, seed=35))),
            **prefixed("broadcast", sdpa_grads(lib, data(2, 1, 5, 4, seed=36), data(1, 3, 6, 4, seed=37),
                                               data(6, 2, seed=38)))}


@case
def multihead_attention(lib):
    padding = np.zeros((3, 5), dtype=bool)
    padding[0, 3:] = True
    module = lib.nn.MultiheadAttention(8, 2, batch_first=True)
    with lib.no_grad():
        for i, (_, p) in enumerate(module.named_parameters()):
            p.copy_(lib.tensor(data(*p.shape, seed=40 + i, scale=0.3)))
    x = lib.tensor(data(3, 5, 8, seed=50), requires_grad=True)
    causal = lib.nn.Transformer.generate_square_subsequent_mask(5)
    out, weights = module(x, x, x, key_padding_mask=lib.tensor(padding), attn_mask=causal, need_weights=False)
    out.backward(lib.tensor(data(*out.shape, seed=99)))
    return {"value": out.detach().numpy(), "grad_x": x.grad.numpy(),
            "grad_in_proj": module.in_proj_weight.grad.numpy(), "weights_is_none": np.array(weights is None)}


if __name__ == "__main__":
    CASE_SET.main()
