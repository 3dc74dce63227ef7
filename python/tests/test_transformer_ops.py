"""The ops Transformers and sampling need, from Python: Strata against PyTorch 2.15's recorded results for the
cases of transformer_ops_cases.py (values and gradients), and what a recording cannot show: errors, views, named
results, sampling's statistics and reproducibility, and the nanoGPT pieces that existed before (AdamW's no-decay
group, an embedding's weight tied to the output layer through save and load)."""
import inspect
import math

import numpy as np
import pytest

import strata
import strata.nn as nn
import strata.nn.functional as F
from transformer_ops_cases import CASE_SET, CASES
from pytorch_reference import assert_matches_pytorch

RECORDED = CASE_SET.recorded()


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch(name):
    assert_matches_pytorch(name, CASES[name](strata), RECORDED[name])


def test_the_ops_are_kernels_not_compositions():
    # The compiled module defines them, so strata._composed's fallbacks are not what runs.
    for name in ("sin", "cos", "erf", "masked_fill", "triu", "tril", "split", "chunk", "topk", "multinomial"):
        assert hasattr(strata._C, name), name
    for name in ("masked_fill_", "triu_", "tril_"):
        assert getattr(strata.Tensor, name).__module__ != "strata._composed.selection", name


def test_masked_fill_errors_name_what_was_wrong():
    x = strata.zeros(3)
    with pytest.raises(TypeError, match="masked_fill: only bool masks.*i32"):
        x.masked_fill(strata.tensor([1, 0, 1], dtype=strata.int32), 1.0)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor.*1 dimension"):
        x.masked_fill(strata.tensor([True, False, True]), strata.zeros(2))
    with pytest.raises(RuntimeError, match=r"masked_fill_: the mask \[3, 1\] must broadcast to self's shape \[3\]"):
        x.masked_fill_(strata.ones(3, 1, dtype=strata.bool), 1.0)
    with pytest.raises(RuntimeError, match="value 256 cannot be converted to dtype u8 without overflow"):
        strata.zeros(2, dtype=strata.uint8).masked_fill(strata.tensor([True, True]), 256)
    leaf = strata.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.masked_fill_(strata.tensor([True, False]), 1.0)
    assert x.masked_fill_(strata.tensor([False, True, False]), 2.0) is x
    assert x.tolist() == [0.0, 2.0, 0.0]


def test_triangles_split_and_chunk_from_python():
    with pytest.raises(RuntimeError, match="triu: input tensor must have at least 2 dimensions"):
        strata.triu(strata.ones(3))
    x = strata.arange(12.0).view(3, 4)
    assert x.triu_(1) is x and x[1].tolist() == [0, 0, 6, 7]
    base = strata.arange(10.0)
    parts = strata.split(base, 4)
    assert isinstance(parts, tuple) and [p.shape[0] for p in parts] == [4, 4, 2]
    parts[1].fill_(-1)  # views: the write reaches the base
    assert base[4:8].tolist() == [-1, -1, -1, -1]
    assert [p.shape[0] for p in base.split([3, 7])] == [3, 7]
    with pytest.raises(RuntimeError, match=r"sum exactly to 10 .* split_sizes=\[3, 3\]"):
        base.split([3, 3])
    with pytest.raises(RuntimeError, match="split_size can only be 0 if dimension size is 0"):
        base.split(0)
    with pytest.raises(RuntimeError, match="chunk: expects `chunks` to be greater than 0"):
        base.chunk(0)
    assert len(strata.zeros(0).chunk(3)) == 3


def test_topk_returns_pytorchs_named_tuple():
    x = strata.tensor([[1.0, 5.0, 3.0, 2.0]])
    r = x.topk(2)
    assert type(r).__name__ == "strata.return_types.topk"
    values, indices = r
    assert values.tolist() == r.values.tolist() == [[5.0, 3.0]]
    assert indices.tolist() == r.indices.tolist() == [[1, 2]]
    with pytest.raises(IndexError, match=r"topk: k \(5\) is out of range for dimension 1 of size 4"):
        x.topk(5)
    with pytest.raises(TypeError, match="topk: not supported for bool"):
        strata.ones(2, dtype=strata.bool).topk(1)


def test_multinomial_samples_by_weight_and_refuses_bad_rows():
    probs = strata.tensor([[0.1, 0.0, 0.9], [0.5, 0.5, 0.0]])
    draws = strata.multinomial(probs, 4000, replacement=True).numpy()
    assert draws.shape == (2, 4000) and draws.dtype == np.int64
    assert set(draws[0]) <= {0, 2} and set(draws[1]) <= {0, 1}
    assert abs((draws[0] == 2).mean() - 0.9) < 0.03 and abs((draws[1] == 0).mean() - 0.5) < 0.04
    no_repeat = probs.multinomial(2).numpy()
    assert all(len(set(row)) == 2 for row in no_repeat)
    g = strata.Generator().manual_seed(5)
    first = strata.multinomial(probs, 8, True, generator=g)
    g.manual_seed(5)
    assert strata.multinomial(probs, 8, True, generator=g).tolist() == first.tolist()
    for bad in ([1.0, -0.5], [1.0, math.inf], [math.nan, 1.0]):
        with pytest.raises(RuntimeError, match=r"probability tensor contains either `inf`, `nan` or element < 0"):
            strata.multinomial(strata.tensor(bad), 1)
    with pytest.raises(RuntimeError, match=r"invalid multinomial distribution \(sum of probabilities <= 0\)"):
        strata.multinomial(strata.zeros(2, 3), 1, replacement=True)
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        strata.multinomial(strata.ones(3), 4)
    with pytest.raises(TypeError, match="floating"):
        strata.multinomial(strata.ones(3, dtype=strata.int64), 1)


def test_gelu_both_forms_and_errors():
    x = strata.linspace(-3, 3, 7)
    exact, tanh = F.gelu(x), F.gelu(x, approximate="tanh")
    assert not np.allclose(exact.numpy(), tanh.numpy(), atol=1e-6)
    assert np.allclose(nn.GELU(approximate="tanh")(x).numpy(), tanh.numpy())
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        F.gelu(x, approximate="fast")
    y = strata.tensor([0.5, -2.0])
    assert y.erf_() is y and np.allclose(y.numpy(), [math.erf(0.5), math.erf(-2.0)])


# --- the nanoGPT pieces that existed before these ops ---

class TinyGPT(nn.Module):
    """nanoGPT's shape of model, tiny: embeddings, a LayerNorm, an MLP with GELU, an output layer tied to wte."""

    def __init__(self, vocab=7, width=4):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(vocab, width), wpe=nn.Embedding(5, width),
                                              ln_f=nn.LayerNorm(width)))
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"), nn.Linear(4 * width, width))
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # as nanoGPT's GPT.__init__

    def forward(self, idx, embedding_gradient=True):
        tokens = self.transformer.wte(idx)
        x = (tokens if embedding_gradient else tokens.detach()) + self.transformer.wpe(strata.arange(idx.shape[1]))
        return self.lm_head(self.transformer.ln_f(x + self.mlp(x)))


def configure_optimizers(model, weight_decay, learning_rate, betas):
    """nanoGPT's GPT.configure_optimizers, unchanged but for the names."""
    param_dict = {pn: p for pn, p in model.named_parameters()}
    param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
    decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
    nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
    optim_groups = [{"params": decay_params, "weight_decay": weight_decay},
                    {"params": nodecay_params, "weight_decay": 0.0}]
    fused_available = "fused" in inspect.signature(strata.optim.AdamW).parameters
    device_type = "cpu"
    use_fused = fused_available and device_type == "cuda"
    extra_args = dict(fused=True) if use_fused else dict()
    return strata.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args), decay_params, nodecay_params


def test_adamw_no_decay_group_leaves_biases_and_norms_undecayed():
    strata.manual_seed(1)
    model = TinyGPT()
    opt, decay, nodecay = configure_optimizers(model, weight_decay=0.5, learning_rate=0.1, betas=(0.9, 0.95))
    # Tied: wte.weight is counted once (named_parameters drops the second name, as PyTorch's).
    names = [n for n, _ in model.named_parameters()]
    assert "transformer.wte.weight" in names and "lm_head.weight" not in names
    assert len(decay) == 4 and len(nodecay) == 4  # wte, wpe, two MLP weights / ln_f weight and bias, MLP biases
    before = [p.detach().clone() for p in decay + nodecay]
    for p in decay + nodecay:
        p.grad = strata.zeros_like(p)  # no gradient: only the decoupled decay can move a parameter
    opt.step()
    for p, old in zip(decay, before[:len(decay)]):
        np.testing.assert_allclose(p.detach().numpy(), old.numpy() * (1 - 0.1 * 0.5), rtol=1e-6)
    for p, old in zip(nodecay, before[len(decay):]):
        np.testing.assert_array_equal(p.detach().numpy(), old.numpy())


def test_tied_weight_is_one_parameter_through_training_and_checkpoints(tmp_path):
    strata.manual_seed(2)
    model = TinyGPT()
    assert model.lm_head.weight is model.transformer.wte.weight
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for _, p in model.named_parameters())
    idx = strata.tensor([[1, 3, 3, 6]])
    targets = strata.tensor([3, 3, 6, 0])

    # Both uses' gradients accumulate in the one tensor: the embedding rows of 1, 3, 6 get the embedding's part on
    # top of the output layer's.
    loss = F.cross_entropy(model(idx).view(-1, 7), targets)
    loss.backward()
    total = model.lm_head.weight.grad.numpy().copy()
    model.zero_grad()
    F.cross_entropy(model(idx, embedding_gradient=False).view(-1, 7), targets).backward()
    head_only = model.lm_head.weight.grad.numpy()
    embedding_part = total - head_only
    assert np.abs(embedding_part[[1, 3, 6]]).sum() > 0
    np.testing.assert_allclose(embedding_part[[0, 2, 4, 5]], 0, atol=1e-7)

    # One AdamW step moves the shared weight once: Adam's first step is lr * sign(grad) per element.
    model.zero_grad()
    F.cross_entropy(model(idx).view(-1, 7), targets).backward()
    opt, _, _ = configure_optimizers(model, weight_decay=0.0, learning_rate=0.01, betas=(0.9, 0.95))
    before = model.lm_head.weight.detach().clone().numpy()
    opt.step()
    moved = model.lm_head.weight.detach().numpy() - before
    assert model.lm_head.weight is model.transformer.wte.weight
    np.testing.assert_allclose(np.abs(moved[np.abs(model.lm_head.weight.grad.numpy()) > 1e-6]), 0.01, rtol=1e-3)

    # Saved under both names with the same values; loaded into a new model, the tie holds and the outputs match.
    state = model.state_dict()
    assert "lm_head.weight" in state and "transformer.wte.weight" in state
    path = tmp_path / "model.safetensors"
    strata.save(state, path)
    loaded = strata.load(path)
    np.testing.assert_array_equal(loaded["lm_head.weight"].numpy(), loaded["transformer.wte.weight"].numpy())
    strata.manual_seed(3)
    fresh = TinyGPT()
    fresh.load_state_dict(loaded)
    assert fresh.lm_head.weight is fresh.transformer.wte.weight
    np.testing.assert_array_equal(fresh(idx).detach().numpy(), model(idx).detach().numpy())
