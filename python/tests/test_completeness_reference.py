"""Strata against PyTorch 2.15's recorded results for the cases of completeness_cases.py (issue 37's list: losses,
activations, BatchNorm1d, Conv1d, padding="same", ceil_mode, F.pad, padding_idx, rounding, trigonometry, %,
reductions, sorting, RMSprop, Adagrad, schedulers): values and gradients within float32 rounding."""
import pytest

import strata
from completeness_cases import CASE_SET, CASES
from pytorch_reference import assert_matches_pytorch

RECORDED = CASE_SET.recorded()


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch(name):
    assert_matches_pytorch(name, CASES[name](strata), RECORDED[name])
