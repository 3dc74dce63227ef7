"""Exchange with PyTorch, where it is installed (Debian's python3-torch is too heavy for every CI run)."""
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
