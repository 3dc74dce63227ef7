"""Strata against PyTorch 2.15's recorded results for the cases of completeness_cases.py (issue 37's list: losses,
activations, BatchNorm1d, Conv1d, padding="same", ceil_mode, F.pad, padding_idx, rounding, trigonometry, %,
reductions, sorting, RMSprop, Adagrad, schedulers): values and gradients within float32 rounding."""
import json

import numpy as np
import pytest

import strata
from completeness_cases import CASES, REFERENCE

RECORDED = json.loads(REFERENCE.read_text())["cases"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch(name):
    got = {k: np.asarray(v) for k, v in CASES[name](strata).items()}
    expected = RECORDED[name]
    assert sorted(got) == sorted(expected)
    for key, want in expected.items():
        want = np.asarray(want, dtype=got[key].dtype if got[key].dtype != object else None)
        assert got[key].shape == want.shape, f"{name}.{key}: shape {got[key].shape}, PyTorch {want.shape}"
        np.testing.assert_allclose(got[key], want, rtol=2e-5, atol=2e-6, err_msg=f"{name}.{key}")
