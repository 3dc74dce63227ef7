"""Tensor conveniences of issue 37 with PyTorch's semantics: formatting, type(), comparisons, splitting, named
tuples, new_* constructors, inference_mode, strata.accelerator and strata.backends."""
import pytest

import strata


def test_format_spec_on_a_0d_tensor_formats_its_value():
    loss = strata.tensor(0.123456)
    assert f"{loss:.4f}" == "0.1235" and f"{strata.tensor(3):>3d}" == "  3"
    assert f"{strata.ones(2)}" == str(strata.ones(2))
    with pytest.raises(TypeError):
        f"{strata.ones(2):.2f}"


def test_type_names_and_conversions():
    t = strata.ones(2)
    assert t.type() == "strata.FloatTensor" and t.long().type() == "strata.LongTensor"
    assert t.type(strata.float64).dtype == strata.float64 and t.type("torch.IntTensor").dtype == strata.int32


def test_equal_allclose_any_all():
    a = strata.tensor([1.0, 2.0])
    assert strata.equal(a, a.clone()) and not a.equal(strata.tensor([1.0, 2.0, 3.0]))
    assert a.allclose(a + 1e-7) and not strata.allclose(a, a + 1e-3)
    nan = strata.tensor([float("nan")])
    assert strata.isclose(nan, nan, equal_nan=True).tolist() == [True] and not bool(strata.isclose(nan, nan))
    assert bool((a > 1).any()) and not bool((a > 1).all()) and (a > 0).all(0).item()


def test_max_and_min_over_a_dim_are_named_tuples():
    m = strata.tensor([[1.0, 5.0], [4.0, 2.0]])
    values, indices = m.max(1)
    assert m.max(dim=1).values.tolist() == values.tolist() == [5.0, 4.0] and indices.tolist() == [1, 0]
    assert strata.min(m, 0).indices.tolist() == [0, 1]
    assert m.max().item() == 5.0 and m.topk(1).indices.tolist() == [[1], [0]]


def test_chunk_split_unbind_follow_pytorchs_sizes():
    t = strata.arange(6)
    assert [c.shape[0] for c in t.chunk(4)] == [2, 2, 2]
    assert [c.shape[0] for c in strata.arange(5).chunk(3)] == [2, 2, 1]
    assert [c.tolist() for c in t.split([1, 5])] == [[0], [1, 2, 3, 4, 5]]
    assert len(t.reshape(2, 3).unbind(1)) == 3
    with pytest.raises(ValueError):
        t.split([2, 2])
    with pytest.raises(ValueError):
        t.repeat()


def test_new_constructors_inherit_dtype_and_device():
    t = strata.ones(2, dtype=strata.float64)
    assert t.new_zeros(3).dtype == strata.float64 and t.new_ones((1, 2)).shape == (1, 2)
    assert t.new_full((2,), 7).tolist() == [7.0, 7.0] and t.new_tensor([1, 2]).dtype == strata.float64
    assert t.new_zeros(2, dtype=strata.int64).dtype == strata.int64


def test_uniform_and_normal_fill_in_place_but_refuse_a_leaf_that_requires_grad():
    t = strata.empty(100)
    assert t.uniform_(-2, -1) is t and float(t.max()) <= -1 and float(t.min()) >= -2
    w = strata.zeros(3, requires_grad=True)
    with pytest.raises(strata.Error):
        w.normal_()
    with strata.no_grad():
        w.normal_()


def test_inference_mode_records_nothing_and_restores_the_mode():
    w = strata.ones(2, requires_grad=True)
    with strata.inference_mode():
        assert not (w * 2).requires_grad
    assert (w * 2).requires_grad

    @strata.inference_mode()
    def predict(x):
        return x * w

    assert not predict(strata.ones(2)).requires_grad
    with strata.inference_mode(False):
        assert (w * 2).requires_grad


def test_accelerator_and_backends():
    if strata.cuda.is_available():
        assert strata.accelerator.current_accelerator().type == "cuda"
    else:
        assert strata.accelerator.current_accelerator() is None and not strata.accelerator.is_available()
    strata.backends.cudnn.benchmark = True
    strata.backends.cudnn.deterministic = True
    assert strata.backends.cudnn.enabled
    with pytest.raises(NotImplementedError):
        strata.backends.cudnn.enabled = False
    strata.backends.cuda.matmul.allow_tf32 = False
    strata.cuda.manual_seed_all(0)


def test_integer_division_and_remainder_stay_integers():
    a, b = strata.tensor([7, -7]), strata.tensor([2, 2])
    assert (a // b).tolist() == [3, -4] and (a % b).tolist() == [1, 1] and (a % b).dtype == strata.int64
    assert (7 % strata.tensor([3.0])).tolist() == [1.0]


def test_unique_nonzero_and_one_argument_where():
    t = strata.tensor([3, 1, 3, 2])
    values, inverse, counts = strata.unique(t, return_inverse=True, return_counts=True)
    assert values.tolist() == [1, 2, 3] and inverse.tolist() == [2, 0, 2, 1] and counts.tolist() == [1, 1, 2]
    assert (t > 1).nonzero().tolist() == [[0], [2], [3]]
    assert [x.tolist() for x in strata.where(strata.eye(2) > 0)] == [[0, 1], [0, 1]]


def test_rounding_has_zero_gradient_and_keeps_requires_grad():
    x = strata.tensor([0.5, 1.5, -0.5], requires_grad=True)
    y = x.round()
    assert y.requires_grad and y.tolist() == [0.0, 2.0, -0.0]
    (y.sum() + x.sum()).backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


def test_numpy_spellings_axis_and_size_are_accepted():
    x = strata.arange(6.0).reshape(2, 3)
    assert x.sum(axis=0).tolist() == [3.0, 5.0, 7.0] and strata.argmax(x, axis=1).tolist() == [2, 2]
    assert x.max(axis=1).values.tolist() == [2.0, 5.0] and strata.cat([x, x], axis=1).shape == (2, 6)
    assert strata.zeros(size=(2, 3)).shape == (2, 3) and strata.rand(size=(4,)).shape == (4,)
    with pytest.raises(TypeError):
        x.sum(axis=0, dim=1)


def test_in_place_unary_forms_write_through_and_keep_autograd_right():
    x = strata.tensor([0.5, -1.5])
    assert x.sin_() is x and x.tolist() == pytest.approx([0.4794255, -0.9974950])
    x.floor_()
    x.clamp_(min=-0.5)
    assert x.tolist() == [0.0, -0.5]
    w = strata.tensor([0.5, 2.0], requires_grad=True)
    h = w * 1.0
    h.exp_()
    h.sum().backward()
    assert w.grad.tolist() == pytest.approx([1.6487213, 7.3890561])
    with pytest.raises(strata.Error):
        w.exp_()  # a leaf that requires grad, outside no_grad: PyTorch's error


def test_random_functions_follow_manual_seed_and_their_laws():
    strata.manual_seed(5)
    a = (strata.randperm(10), strata.normal(0.0, 1.0, (3,)), strata.multinomial(strata.tensor([0.0, 1.0, 3.0]), 2))
    strata.manual_seed(5)
    b = (strata.randperm(10), strata.normal(0.0, 1.0, (3,)), strata.multinomial(strata.tensor([0.0, 1.0, 3.0]), 2))
    assert all(x.tolist() == y.tolist() for x, y in zip(a, b))
    assert sorted(a[0].tolist()) == list(range(10)) and sorted(a[2].tolist()) == [1, 2]  # never the zero weight
    draws = strata.multinomial(strata.tensor([0.0, 1.0, 3.0]), 4000, replacement=True)
    assert 0 not in draws.tolist() and 0.7 < float((draws == 2).float().mean()) < 0.8
    coin = strata.bernoulli(strata.full((4000,), 0.25))
    assert 0.2 < float(coin.mean()) < 0.3 and set(coin.tolist()) <= {0.0, 1.0}
    with pytest.raises(strata.Error):
        strata.multinomial(strata.tensor([1.0, -1.0]), 1)


def test_shape_helpers_refuse_bad_arguments():
    with pytest.raises(strata.ShapeError):
        strata.dot(strata.ones(2, 2), strata.ones(2))
    with pytest.raises(ValueError):
        strata.roll(strata.ones(3), (1, 2), 0)
    with pytest.raises(NotImplementedError):
        strata.zeros(2, 2).scatter(0, strata.zeros(1, 2, dtype=strata.int64), 1.0, reduce="multiply")


def test_composed_functions_check_their_tensor_argument():
    with pytest.raises(TypeError, match="sort"):
        strata.sort("x")
    with pytest.raises(TypeError, match="must be Tensor"):
        strata.cumsum([1, 2], 0)
    assert strata.hstack([strata.ones(2), strata.zeros(1)]).tolist() == [1.0, 1.0, 0.0]


def test_sum_and_mean_take_a_dtype():
    t = strata.tensor([1, 2, 4])
    assert t.sum(dtype=strata.float64).dtype == strata.float64
    assert strata.mean(t, dtype=strata.float32).item() == pytest.approx(7 / 3)
    assert strata.ones(2, 3).sum(axis=1, dtype=strata.float64).tolist() == [3.0, 3.0]
