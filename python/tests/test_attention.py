"""strata.nn.functional.scaled_dot_product_attention: against PyTorch 2.15's recorded values and gradients
(attention_cases.py, attention_reference.json), against the composed formula, dropout, and PyTorch's refusals."""
import numpy as np
import pytest

import strata
from attention_cases import CASE_SET, CASES, data
from pytorch_reference import assert_matches_pytorch
from strata.nn import functional as F
from strata.nn.transformer import _scaled_dot_product_attention_composed as composed

RECORDED = CASE_SET.recorded()


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch(name):
    assert_matches_pytorch(name, CASES[name](strata), RECORDED[name])


def run(f, arrays, seed=None, **kwargs):
    leaves = [strata.tensor(a, requires_grad=True) for a in arrays]
    if seed is not None:
        strata.manual_seed(seed)
    out = f(*leaves, **kwargs)
    out.backward(strata.tensor(data(*out.shape, seed=99)))
    return [out.detach().numpy()] + [t.grad.numpy() for t in leaves]


@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.3}], ids=["plain", "causal", "scale"])
def test_fused_matches_composed_across_blocks(kwargs):
    arrays = data(2, 67, 5, seed=1), data(2, 129, 5, seed=2), data(2, 129, 3, seed=3)
    for got, want in zip(run(F.scaled_dot_product_attention, arrays, **kwargs), run(composed, arrays, **kwargs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_dropout_is_seeded_and_matches_the_composed_path():
    arrays = data(2, 9, 4, seed=4), data(2, 11, 4, seed=5), data(2, 11, 3, seed=6)
    first = run(F.scaled_dot_product_attention, arrays, seed=3, dropout_p=0.4)
    again = run(F.scaled_dot_product_attention, arrays, seed=3, dropout_p=0.4)
    other = run(F.scaled_dot_product_attention, arrays, seed=4, dropout_p=0.4)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], other[0])
    # The kernel drops what dropout() drops from the same generator state, in both passes.
    for got, want in zip(first, run(composed, arrays, seed=3, dropout_p=0.4)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_refusals_name_the_problem():
    q, k, v = strata.randn(2, 3, 4), strata.randn(2, 5, 4), strata.randn(2, 5, 6)
    with pytest.raises(ValueError, match="attn_mask or is_causal"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=strata.ones(3, 5, dtype=strata.bool), is_causal=True)
    with pytest.raises(ValueError, match="at least 2-D"):
        F.scaled_dot_product_attention(strata.randn(4), strata.randn(4), strata.randn(4))
    with pytest.raises(ValueError, match="attn_mask must be bool, f32"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=strata.ones(3, 5, dtype=strata.int64))
    with pytest.raises(ValueError, match="does not broadcast"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=strata.ones(3, 4, dtype=strata.bool))
    with pytest.raises(ValueError, match="dropout_p"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)
