"""Exchange with PyTorch, where it is installed (scripts/install-deps installs Debian's python3-torch, 1.13, for
make test; 70 MB to download on a machine with the rest of the set)."""
import numpy as np
import pytest

import strata

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian's python3-torch); its checks are skipped")


def test_torch_round_trip_shares_memory():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = strata.from_dlpack(x)
    x[0, 0] = 5.0
    assert t[0, 0].item() == 5.0
    y = torch.from_dlpack(t)
    assert y.data_ptr() == x.data_ptr()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_cross_entropy_with_ignored_targets_matches_pytorch(reduction, label_smoothing):
    x = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, -100, 3, 2, -100, 1])
    expected = torch.nn.functional.cross_entropy(x, target, reduction=reduction, label_smoothing=label_smoothing)
    expected.sum().backward()
    xs = strata.from_dlpack(x.detach().clone()).requires_grad_()
    got = strata.nn.functional.cross_entropy(xs, strata.from_dlpack(target), reduction=reduction,
                                             label_smoothing=label_smoothing)
    got.sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-9)
    np.testing.assert_allclose(xs.grad.numpy(), x.grad.numpy(), rtol=1e-9, atol=1e-15)
