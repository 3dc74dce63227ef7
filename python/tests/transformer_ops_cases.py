"""Cases of the ops Transformers and sampling need, written once against PyTorch's API so that the same code
runs with `torch` and with `strata`: each case takes the library and returns named arrays (values and gradients).

    # re-record the reference with a Python that has PyTorch 2.15 and NumPy 1.24 (the inputs' generator):
    python3 python/tests/transformer_ops_cases.py --record
writes transformer_ops_reference.json beside this file; test_transformer_ops.py compares Strata with it.
"""
import math

import numpy as np

from pytorch_reference import CaseSet, data, leaf  # noqa: F401 (the cases' helpers)

CASE_SET = CaseSet("transformer_ops_reference.json")
CASES, REFERENCE, case = CASE_SET.cases, CASE_SET.reference, CASE_SET.case


def backward(lib, output, seed=99):
    output.backward(lib.tensor(data(*output.shape, seed=seed)))


def grad(t):
    return t.grad.numpy()


@case
def unary(lib):
    F = lib.nn.functional
    out = {}
    for name, f in [("sin", lib.sin), ("cos", lambda t: t.cos()), ("erf", lib.erf),
                    ("gelu", F.gelu), ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh")),
                    ("module_gelu_tanh", lib.nn.GELU(approximate="tanh")), ("module_gelu", lib.nn.GELU())]:
        x = leaf(lib, data(4, 6, seed=1, scale=3.0))
        y = f(x)
        backward(lib, y)
        out[name] = y.detach().numpy()
        out[name + "_grad"] = grad(x)
    return out


@case
def masked_fill(lib):
    out = {}
    # Causal attention scores: -inf above the diagonal, then softmax.
    x = leaf(lib, data(2, 5, 5, seed=2))
    mask = lib.tril(lib.ones(5, 5)) == 0
    y = lib.softmax(x.masked_fill(mask, float("-inf")), -1)
    backward(lib, y)
    out["causal_softmax"], out["causal_softmax_grad"] = y.detach().numpy(), grad(x)
    # The mask broadcast against self, both ways.
    row = leaf(lib, data(4, seed=3))
    column_mask = lib.tensor(np.array([[True], [False], [True]]))
    y = row.masked_fill(column_mask, 0.5)
    backward(lib, y)
    out["broadcast"], out["broadcast_grad"] = y.detach().numpy(), grad(row)
    # A 0-dim value tensor that requires grad.
    x = leaf(lib, data(3, 4, seed=4))
    value = lib.tensor(1.25, requires_grad=True)
    y = lib.masked_fill(x, lib.tensor(data(3, 4, seed=5) > 0), value)
    backward(lib, y)
    out["tensor_value"], out["tensor_value_grad"], out["value_grad"] = y.detach().numpy(), grad(x), grad(value)
    # In place on a non-leaf; integer and bool tensors.
    x = leaf(lib, data(3, 4, seed=6))
    y = x * 2
    y.masked_fill_(lib.tensor(data(4, seed=7) > 0), -3.0)
    backward(lib, y)
    out["in_place"], out["in_place_grad"] = y.detach().numpy(), grad(x)
    ints = lib.tensor(np.arange(6, dtype=np.int64))
    out["int64_truncated"] = ints.masked_fill(ints > 2, 7.9).numpy()
    out["uint8_wrapped"] = lib.tensor(np.arange(3, dtype=np.uint8)).masked_fill(lib.tensor([True, False, True]),
                                                                               -1).numpy()
    return out


@case
def triangles(lib):
    out = {}
    for diagonal in (-1, 0, 2):
        for name, f in [("triu", lib.triu), ("tril", lambda t, d: t.tril(d))]:
            x = leaf(lib, data(2, 3, 4, seed=8))
            y = f(x, diagonal)
            backward(lib, y)
            out[f"{name}{diagonal}"], out[f"{name}{diagonal}_grad"] = y.detach().numpy(), grad(x)
    x = lib.tensor(data(4, 3, seed=9))
    out["triu_transposed"] = lib.triu(x.t(), 1).numpy()
    inplace = lib.tensor(data(3, 3, seed=10))
    inplace.tril_(-1)
    out["tril_"] = inplace.numpy()
    out["bool_mask"] = lib.tril(lib.ones(3, 4, dtype=lib.bool)).numpy()
    return out


@case
def split_chunk(lib):
    out = {}
    x = leaf(lib, data(3, 7, seed=11))
    a, b, c = x.split(3, dim=1)
    y = lib.cat([a * 2, b.sin(), c * c], 1)
    backward(lib, y)
    out["split"], out["split_grad"] = y.detach().numpy(), grad(x)
    x = leaf(lib, data(6, 2, seed=12))
    parts = lib.split(x, [1, 3, 2])
    y = lib.cat([parts[0] * 3, parts[1].exp(), parts[2] - 1])
    backward(lib, y)
    out["sections"], out["sections_grad"] = y.detach().numpy(), grad(x)
    x = leaf(lib, data(2, 10, seed=13))
    chunks = x.chunk(4, -1)
    out["chunk_sizes"] = np.array([t.shape[-1] for t in chunks])
    y = chunks[0] * chunks[1] + chunks[2] - chunks[3].sum(-1, keepdim=True)
    backward(lib, y)
    out["chunk"], out["chunk_grad"] = y.detach().numpy(), grad(x)
    out["chunk_fewer"] = np.array([t.shape[0] for t in lib.chunk(lib.zeros(5), 4)])
    return out


@case
def topk(lib):
    out = {}
    x = leaf(lib, data(3, 8, seed=14))
    r = lib.topk(x, 3)
    backward(lib, r.values)
    out["values"], out["indices"], out["grad"] = r.values.detach().numpy(), r.indices.numpy(), grad(x)
    x = leaf(lib, data(5, 4, seed=15))
    values, indices = x.topk(2, dim=0, largest=False)
    backward(lib, values)
    out["smallest_dim0"], out["smallest_dim0_indices"], out["smallest_dim0_grad"] = (values.detach().numpy(),
                                                                                      indices.numpy(), grad(x))
    with_nan = lib.tensor(np.array([1.0, math.nan, 3.0, -1.0], dtype=np.float32))
    out["nan_largest"] = with_nan.topk(2).indices.numpy()
    out["nan_smallest"] = with_nan.topk(2, largest=False).indices.numpy()
    out["int"] = lib.tensor(np.array([[4, 9, 1, 7]], dtype=np.int64)).topk(2).values.numpy()
    # nanoGPT's sampling: logits below the k-th largest become -inf.
    logits = lib.tensor(data(2, 6, seed=16))
    v, _ = lib.topk(logits, 3)
    logits.masked_fill_(logits < v[:, -1:], -float("Inf"))  # nanoGPT: logits[logits < v[:, [-1]]] = -float("Inf")
    out["top_k_probs"] = lib.nn.functional.softmax(logits, dim=-1).numpy()
    return out


@case
def multinomial(lib):
    # Draws differ between generators; these rows leave no choice (or only an order, which is sorted away).
    out = {}
    one_hot = lib.tensor(np.array([[0, 0, 1, 0], [0.5, 0, 0, 0]], dtype=np.float32))
    out["one_hot"] = lib.multinomial(one_hot, 5, replacement=True).numpy()
    exact = lib.tensor(np.array([[0, 2, 0, 1, 3], [1, 1, 0, 1, 0]], dtype=np.float64))
    out["all_positive_drawn"] = np.sort(lib.multinomial(exact, 3).numpy(), axis=1)
    out["one_row"] = lib.multinomial(lib.tensor(np.array([0, 0, 0.1], dtype=np.float32)), 2, True).numpy()
    return out


@case
def attention_block(lib):
    """nanoGPT's CausalSelfAttention and MLP written with the ops above (split, view, transpose, masked_fill,
    softmax, GELU tanh), on fixed weights: values and every input's gradient."""
    F = lib.nn.functional
    B, T, C, H = 2, 5, 8, 2
    x = leaf(lib, data(B, T, C, seed=20))
    w_attn = leaf(lib, data(3 * C, C, seed=21, scale=0.3))
    w_proj = leaf(lib, data(C, C, seed=22, scale=0.3))
    w_fc = leaf(lib, data(4 * C, C, seed=23, scale=0.3))
    w_out = leaf(lib, data(C, 4 * C, seed=24, scale=0.3))
    bias = lib.tril(lib.ones(T, T)).view(1, 1, T, T)
    q, k, v = F.linear(x, w_attn).split(C, dim=2)
    k = k.view(B, T, H, C // H).transpose(1, 2)
    q = q.view(B, T, H, C // H).transpose(1, 2)
    v = v.view(B, T, H, C // H).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(bias[:, :, :T, :T] == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    y = x + F.linear(y, w_proj)
    y = y + F.linear(F.gelu(F.linear(y, w_fc), approximate="tanh"), w_out)
    backward(lib, y)
    return {"out": y.detach().numpy(), "x_grad": grad(x), "w_attn_grad": grad(w_attn), "w_proj_grad": grad(w_proj),
            "w_fc_grad": grad(w_fc), "w_out_grad": grad(w_out)}


@case
def tied_weights(lib):
    """An embedding and an output layer sharing one weight (nanoGPT's wte.weight = lm_head.weight): the gradient
    of both uses, and one AdamW step with a no-decay group."""
    lib.manual_seed(0)
    wte = lib.nn.Embedding(6, 4)
    lm_head = lib.nn.Linear(4, 6, bias=False)
    norm = lib.nn.LayerNorm(4)
    with lib.no_grad():
        lm_head.weight.copy_(lib.tensor(data(6, 4, seed=30)))
    wte.weight = lm_head.weight
    idx = lib.tensor(np.array([[1, 4, 4, 0]], dtype=np.int64))
    logits = lm_head(norm(wte(idx)))
    loss = lib.nn.functional.cross_entropy(logits.view(-1, 6), lib.tensor(np.array([4, 4, 0, 2], dtype=np.int64)))
    loss.backward()
    out = {"loss": loss.detach().numpy(), "weight_grad": wte.weight.grad.numpy().copy()}
    params = [wte.weight, norm.weight, norm.bias]
    opt = lib.optim.AdamW([{"params": [wte.weight], "weight_decay": 0.1},
                           {"params": [norm.weight, norm.bias], "weight_decay": 0.0}], lr=0.01, betas=(0.9, 0.95))
    opt.step()
    out["weight_after_step"] = lm_head.weight.detach().numpy()
    out["norm_after_step"] = np.concatenate([p.detach().numpy() for p in params[1:]])
    return out


if __name__ == "__main__":
    CASE_SET.main()
