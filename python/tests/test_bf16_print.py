"""A bfloat16 tensor prints as PyTorch prints it: one line, the values to four places, the dtype named (issue 35
found the values followed by a second line, `<Tensor 2 bf16 @cpu>`)."""
import strata


def test_a_bfloat16_tensor_prints_as_pytorchs_does():
    t = strata.tensor([1.5, -2.25], dtype=strata.bfloat16)
    assert str(t) == "tensor([ 1.5000, -2.2500], dtype=strata.bfloat16)"
    assert repr(t) == str(t)
