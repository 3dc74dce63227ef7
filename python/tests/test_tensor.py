import math

import numpy as np
import pytest

import strata


def test_dtypes_have_pytorch_names_and_aliases():
    assert strata.float32 == strata.float
    assert strata.float64 == strata.double
    assert strata.int64 == strata.long
    assert strata.float16 == strata.half
    assert repr(strata.float32) == "strata.float32"
    assert strata.float64.itemsize == 8
    assert strata.float32.is_floating_point and not strata.int64.is_floating_point


def test_device_parses_strings_and_compares():
    d = strata.device("cuda:1")
    assert d.type == "cuda" and d.index == 1
    assert str(d) == "cuda:1"
    assert repr(d) == "device(type='cuda', index=1)"
    assert strata.device("cpu") == "cpu"
    assert strata.device("cuda", 0) == strata.device("cuda:0")
    with pytest.raises(ValueError, match="tpu"):
        strata.device("tpu")


def test_creation_functions(device):
    z = strata.zeros(2, 3, device=device)
    assert z.shape == (2, 3) and z.dtype == strata.float32 and z.device == strata.device(device)
    assert strata.ones((4,), dtype=strata.int64).tolist() == [1, 1, 1, 1]
    assert strata.full((2, 2), 7).tolist() == [[7, 7], [7, 7]]
    assert strata.full((2, 2), 7).dtype == strata.int64
    assert strata.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert strata.arange(5).dtype == strata.int64
    assert strata.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert strata.arange(1, 10, 3).tolist() == [1, 4, 7]
    assert strata.eye(2).tolist() == [[1, 0], [0, 1]]
    assert strata.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]
    assert strata.empty(3, 4, device=device).shape == (3, 4)
    r = strata.rand(1000, device=device)
    assert 0.0 <= r.min().item() and r.max().item() < 1.0
    assert abs(strata.randn(10000, device=device).mean().item()) < 0.05
    assert strata.zeros_like(r).shape == (1000,)
    assert strata.ones(2, requires_grad=True).requires_grad


def test_tensor_infers_dtype_as_pytorch():
    assert strata.tensor([1.5, 2]).dtype == strata.float32
    assert strata.tensor([1, 2]).dtype == strata.int64
    assert strata.tensor([True, False]).dtype == strata.bool
    assert strata.tensor(np.array([1.0], dtype=np.float64)).dtype == strata.float64
    assert strata.tensor(3.0).shape == ()
    assert strata.tensor([[1, 2], [3, 4]], dtype=strata.float64).tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_random_numbers_follow_the_seed():
    strata.manual_seed(7)
    a = strata.rand(5).tolist()
    strata.manual_seed(7)
    assert strata.rand(5).tolist() == a


def test_randint_takes_pytorchs_two_forms():
    strata.manual_seed(3)
    a = strata.randint(0, 57, (8,))
    strata.manual_seed(3)
    b = strata.randint(57, (8,))  # nanoGPT's train.py: torch.randint(len(data) - block_size, (batch_size,))
    assert a.tolist() == b.tolist() and b.dtype == strata.int64
    assert strata.randint(4, size=(2, 3)).shape == (2, 3)
    assert 0 <= strata.randint(3, (1000,)).min().item() and strata.randint(3, (1000,)).max().item() == 2
    with pytest.raises(TypeError, match="size must be a tuple of ints, got int"):
        strata.randint(5, 10)


def test_operators(device):
    a = strata.tensor([1.0, 2.0, 3.0], device=device)
    b = strata.tensor([4.0, 5.0, 6.0], device=device)
    assert (a + b).tolist() == [5, 7, 9]
    assert (a - b).tolist() == [-3, -3, -3]
    assert (a * b).tolist() == [4, 10, 18]
    assert (b / a).tolist() == [4, 2.5, 2]
    assert (-a).tolist() == [-1, -2, -3]
    assert (a + 1).tolist() == [2, 3, 4]
    assert (1 + a).tolist() == [2, 3, 4]
    assert (10 - a).tolist() == [9, 8, 7]
    assert (2 * a).tolist() == [2, 4, 6]
    assert (6 / a).tolist() == [6, 3, 2]
    assert (a ** 2).tolist() == [1, 4, 9]
    assert (2 ** a).tolist() == [2, 4, 8]
    assert (a < b).tolist() == [True, True, True]
    assert (a == strata.tensor([1.0, 0.0, 3.0], device=device)).tolist() == [True, False, True]
    assert (a >= 2).tolist() == [False, True, True]
    assert (a != 2).dtype == strata.bool
    assert abs(strata.tensor([-1.0, 2.0])).tolist() == [1, 2]


def test_in_place_operators_keep_the_tensor(device):
    a = strata.ones(3, device=device)
    alias = a
    a += 1
    a *= strata.full((3,), 3.0, device=device)
    assert alias.tolist() == [6, 6, 6]
    a -= 1
    a /= 5
    assert alias.tolist() == [1, 1, 1]


def test_matmul_operator(device):
    a = strata.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    b = strata.tensor([[5.0], [6.0]], device=device)
    assert (a @ b).tolist() == [[17.0], [39.0]]
    assert strata.matmul(a, b).shape == (2, 1)
    assert a.mm(b).tolist() == [[17.0], [39.0]]


def test_broadcasting_and_promotion():
    x = strata.arange(3).reshape(3, 1) + strata.tensor([0.5, 1.5])
    assert x.shape == (3, 2) and x.dtype == strata.float32
    with pytest.raises(strata.ShapeError):
        strata.ones(2, 3) + strata.ones(4)


def test_reductions():
    x = strata.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    assert x.sum().item() == 21.0
    assert x.sum(dim=0).tolist() == [5, 7, 9]
    assert x.sum(1, keepdim=True).shape == (2, 1)
    assert x.mean().item() == 3.5
    assert x.max().item() == 6.0
    values, indices = x.max(dim=1)
    assert values.tolist() == [5, 6] and indices.tolist() == [1, 2]
    assert x.argmax().item() == 5
    assert x.argmin(dim=1).tolist() == [0, 1]
    assert math.isclose(x.softmax(dim=1).sum(dim=1).tolist()[0], 1.0, rel_tol=1e-6)
    assert math.isclose(strata.tensor([3.0, 4.0]).norm().item(), 5.0)


def test_unary_functions():
    x = strata.tensor([0.0, 1.0])
    assert strata.exp(x).tolist() == pytest.approx([1.0, math.e])
    assert x.relu().tolist() == [0.0, 1.0]
    assert strata.sigmoid(x).tolist()[0] == 0.5
    assert strata.clamp(strata.tensor([-2.0, 0.5, 3.0]), min=0, max=1).tolist() == [0, 0.5, 1]
    assert strata.where(x > 0, x, strata.tensor([9.0, 9.0])).tolist() == [9.0, 1.0]


def test_views_share_memory():
    x = strata.arange(12, dtype=strata.float32)
    v = x.reshape(3, 4)
    assert v.shares_storage(x)
    assert v.t().shape == (4, 3) and not v.t().is_contiguous()
    assert v.T.tolist() == v.t().tolist()
    assert v.permute(1, 0).shape == (4, 3)
    assert v.unsqueeze(0).shape == (1, 3, 4)
    assert v.unsqueeze(0).squeeze(0).shape == (3, 4)
    assert v.flatten().shape == (12,)
    assert strata.ones(3, 1).expand(3, 4).shape == (3, 4)
    assert strata.cat([v, v]).shape == (6, 4)
    assert strata.stack([x, x], dim=1).shape == (12, 2)
    assert v.view(-1, 6).shape == (2, 6)


def test_indexing_with_ints_slices_and_negative_indices():
    x = strata.arange(24).reshape(2, 3, 4)
    assert x[1].shape == (3, 4)
    assert x[1, 2].tolist() == [20, 21, 22, 23]
    assert x[-1, -1, -1].item() == 23
    assert x[:, 1].shape == (2, 4)
    assert x[0, :, 1:3].tolist() == [[1, 2], [5, 6], [9, 10]]
    assert x[0, 0, ::2].tolist() == [0, 2]
    assert x[0, 0, -2:].tolist() == [2, 3]
    assert x[..., 0].shape == (2, 3)
    assert x[None].shape == (1, 2, 3, 4)
    assert x[0, None, :, 0].shape == (1, 3)
    assert x[0, 0, strata.tensor([3, 0])].tolist() == [3, 0]
    assert x[1:].shares_storage(x)


def test_indexing_errors_are_python_errors():
    x = strata.arange(6).reshape(2, 3)
    with pytest.raises(IndexError):
        x[2]
    with pytest.raises(IndexError):
        x[0, 0, 0]
    with pytest.raises(ValueError, match="step"):
        x[::-1]
    with pytest.raises(TypeError):
        x["a"]


def test_list_indices_gather_and_keep_the_dim_as_in_pytorch(device):
    x = strata.arange(24, device=device).reshape(2, 3, 4)
    assert x[:, [-1], :].shape == (2, 1, 4)  # nanoGPT: lm_head(x[:, [-1], :])
    assert x[:, [-1], :].tolist() == [[[8, 9, 10, 11]], [[20, 21, 22, 23]]]
    assert x[[1, 0]].tolist() == [x[1].tolist(), x[0].tolist()]
    assert x[0, :, [3, 0]].tolist() == [[3, 0], [7, 4], [11, 8]]
    assert x[..., [0]].shape == (2, 3, 1)
    assert x[[]].shape == (0, 3, 4)
    assert x[0, strata.tensor([[2, 0], [1, 1]], device=device)].tolist() == [[[8, 9, 10, 11], [0, 1, 2, 3]],
                                                                           [[4, 5, 6, 7], [4, 5, 6, 7]]]
    v = strata.tensor([[5.0, 3.0], [9.0, 1.0]], device=device)
    assert v[:, [-1]].tolist() == [[3.0], [1.0]]  # nanoGPT's top-k threshold


def test_bad_list_indices_raise_index_errors_that_name_them():
    x = strata.arange(6).reshape(2, 3)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        x[:, [0, 3]]
    with pytest.raises(IndexError, match="index -3 is out of bounds for dimension 0 with size 2"):
        x[[-3]]
    with pytest.raises(IndexError, match="ints or bools, got f32 values"):
        x[[0.5]]
    with pytest.raises(IndexError, match="got a list in it .*tuple of indices"):
        x[[[0, 1], [1, 2]]]
    with pytest.raises(IndexError, match="at most one index tensor, list or boolean mask, got 2"):
        x[[0, 1], [1, 2]]
    with pytest.raises(IndexError, match="assigning through an integer index tensor or list is not supported"):
        x[:, [0]] = 1


def test_boolean_masks_select_and_assign(device):
    x = strata.arange(12, device=device).reshape(3, 4)
    assert x[x > 8].tolist() == [9, 10, 11]
    assert x[[True, False, True]].tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert x[:, strata.tensor([False, True, False, True], device=device)].tolist() == [[1, 3], [5, 7], [9, 11]]
    assert x[x > 100].shape == (0,)
    logits = strata.tensor([[1.0, 4.0, 2.0, 3.0], [0.5, 0.125, 0.75, 0.25]], device=device)
    v, _ = strata.topk(logits, 2)
    logits[logits < v[:, [-1]]] = -float("Inf")  # nanoGPT's generate, verbatim
    inf = float("inf")
    assert logits.tolist() == [[-inf, 4.0, -inf, 3.0], [0.5, -inf, 0.75, -inf]]
    y = strata.zeros(2, 3, device=device)
    y[:, strata.tensor([True, False, True], device=device)] = 5
    y[strata.tensor([False, True], device=device)] = strata.tensor([1.0, 2.0, 3.0], device=device)
    assert y.tolist() == [[5, 0, 5], [1, 2, 3]]


def test_boolean_masks_of_the_wrong_shape_name_both_shapes():
    x = strata.zeros(2, 4)
    with pytest.raises(IndexError, match=r"mask's shape \[2, 3\] does not match the shape \[2, 4\]"):
        x[strata.zeros(2, 3) > 0]
    with pytest.raises(IndexError, match=r"mask's shape \[3\] does not match the shape \[4\] .*from dim 1"):
        x[:, [True, False, True]] = 1.0
    with pytest.raises(IndexError, match=r"value of shape \[2, 4\] cannot be assigned .*mask of shape \[2\]"):
        x[[True, False]] = strata.ones(2, 4)


def test_gradients_flow_through_list_and_mask_indexing(device):
    w = strata.arange(6.0, device=device).reshape(2, 3).requires_grad_()
    (w[:, [-1, -1]] * strata.tensor([1.0, 2.0], device=device)).sum().backward()
    assert w.grad.tolist() == [[0, 0, 3], [0, 0, 3]]
    w.grad = None
    w[w > 2.5].pow(2).sum().backward()
    assert w.grad.tolist() == [[0, 0, 0], [6, 8, 10]]
    w.grad = None
    fill = strata.tensor(10.0, device=device, requires_grad=True)
    a = w * 2
    a[a > 5] = fill
    a[a < 1] = 0.0
    (a * a).sum().backward()
    assert w.grad.tolist() == [[0, 8, 16], [0, 0, 0]]
    assert fill.grad.item() == 60.0  # three positions of 10, each d(a*a)/da = 20
    w.grad = fill.grad = None
    b = w * 1
    b.masked_fill_(b > 3, fill)  # computed by where(), which must not keep b: the next write would void backward
    b.masked_fill_(b < 1, 0.0)
    b.sum().backward()
    assert w.grad.tolist() == [[0, 1, 1], [1, 0, 0]] and fill.grad.item() == 2.0


def test_setitem_writes_through_views():
    x = strata.zeros(3, 4)
    x[1] = 5.0
    x[:, 0] = strata.tensor([1.0, 2.0, 3.0])
    x[2, 1:3] = strata.tensor([7.0, 8.0])
    assert x.tolist() == [[1, 0, 0, 0], [2, 5, 5, 5], [3, 7, 8, 0]]


def test_python_numbers_from_tensors():
    assert strata.tensor([2.5]).item() == 2.5
    assert isinstance(strata.tensor([3]).item(), int)
    assert isinstance(strata.tensor([True]).item(), bool)
    assert float(strata.tensor(1.5)) == 1.5
    assert int(strata.tensor(7)) == 7
    assert bool(strata.tensor([1]))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(strata.ones(2))
    assert len(strata.ones(5, 2)) == 5
    assert [row.tolist() for row in strata.arange(4).reshape(2, 2)] == [[0, 1], [2, 3]]


def test_properties(device):
    x = strata.zeros(2, 3, dtype=strata.float64, device=device)
    assert x.shape == (2, 3) and x.size() == (2, 3) and x.size(1) == 3 and x.size(-1) == 3
    assert x.dtype == strata.float64 and x.ndim == 2 and x.dim() == 2 and x.numel() == 6
    assert x.device.type == device
    assert x.stride() == (3, 1) and x.element_size() == 8 and x.nbytes == 48


def test_to_devices_and_dtypes(device):
    x = strata.arange(4, dtype=strata.float32)
    assert x.to("cpu") is not None and x.to("cpu").shares_storage(x)
    y = x.to(device)
    assert y.device == strata.device(device)
    assert y.to(strata.float64).dtype == strata.float64
    assert y.to(device, strata.int32).dtype == strata.int32
    assert y.to(device=device, dtype=strata.float16).dtype == strata.float16
    assert y.cpu().tolist() == [0, 1, 2, 3]
    copy = x.copy_to("cpu")
    assert not copy.shares_storage(x) and copy.tolist() == x.tolist()
    assert x.to("cpu", copy=True).shares_storage(x) is False
    assert x.double().dtype == strata.float64 and x.long().dtype == strata.int64


def test_repr_reads_as_pytorchs():
    assert repr(strata.tensor([[1.0, 2.0], [3.0, 4.0]])) == "tensor([[1., 2.],\n        [3., 4.]])"
    assert repr(strata.tensor(3.5)) == "tensor(3.5000)"
    assert repr(strata.ones(3, dtype=strata.bfloat16)) == "tensor([1., 1., 1.], dtype=strata.bfloat16)"
    assert repr(strata.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(strata.ones(2, requires_grad=True)) == "tensor([1., 1.], requires_grad=True)"
    assert repr(strata.ones(2, requires_grad=True) * 2) == "tensor([2., 2.], grad_fn=<mul>)"
    assert repr(strata.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert str(strata.tensor([1.5])) == "tensor([1.5000])"


def test_device_mismatch_is_a_runtime_error_subclass():
    if strata.cuda.is_available():
        with pytest.raises(strata.DeviceMismatchError):
            strata.ones(2, device="cuda") + strata.ones(2)
    assert issubclass(strata.DeviceMismatchError, RuntimeError)


def test_setitem_takes_lists_and_arrays():
    x = strata.zeros(2, 3)
    x[0] = [1.0, 2.0, 3.0]
    x[1] = np.array([4, 5, 6])
    x[1, 0] = np.float32(9)
    assert x.tolist() == [[1, 2, 3], [9, 5, 6]]
