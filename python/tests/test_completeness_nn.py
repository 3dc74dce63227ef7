"""strata.nn beyond the C++ layers (issue 37): hooks, containers, inplace=, nn.init, and PyTorch's errors for what
is refused. Values and gradients against PyTorch are in test_completeness_reference.py."""
import math

import pytest

import strata
from strata import nn
from strata.nn import functional as F


def test_forward_pre_hook_replaces_the_input_and_forward_hook_the_output():
    lin = nn.Linear(2, 1)
    calls = []
    pre = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    post = lin.register_forward_hook(lambda m, args, out: calls.append(out.shape) or out + 1)
    out = lin(strata.ones(3, 2))
    assert calls == [(3, 1)]
    assert out.tolist() == (lin.bias.detach() + 1).expand(3, 1).tolist()
    pre.remove()
    post.remove()
    assert lin(strata.ones(1, 2)).tolist() == lin.forward(strata.ones(1, 2)).tolist()


def test_hooks_run_in_order_prepend_first_and_with_kwargs():
    order = []
    m = nn.Identity()
    m.register_forward_hook(lambda *a: order.append("second"))
    m.register_forward_hook(lambda *a: order.append("first"), prepend=True)
    with m.register_forward_pre_hook(lambda mod, args, kwargs: (args, kwargs), with_kwargs=True):
        m(strata.ones(1))
    assert order == ["first", "second"]
    assert not m._forward_pre_hooks


def test_hook_sees_intermediate_activations_in_a_sequential():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    seen = {}
    model[1].register_forward_hook(lambda m, args, out: seen.setdefault("relu", out))
    model(strata.randn(5, 4))
    assert seen["relu"].shape == (5, 3) and float(seen["relu"].min()) >= 0


def test_module_dict_and_parameter_list_register_their_contents():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.Linear(2, 1)})
            self.scales = nn.ParameterList([strata.ones(2), nn.Parameter(strata.zeros(1))])

    net = Net()
    keys = set(net.state_dict())
    assert {"heads.a.weight", "heads.b.bias", "scales.0", "scales.1"} <= keys
    assert len(list(net.parameters())) == 6
    assert isinstance(net.scales[0], nn.Parameter) and net.scales[0].requires_grad
    assert list(net.heads.keys()) == ["a", "b"] and "a" in net.heads and len(net.heads) == 2
    net.heads["c"] = nn.Linear(1, 1)
    assert "heads.c.weight" in net.state_dict()


def test_module_list_extend_and_insert_number_as_pytorch():
    layers = nn.ModuleList([nn.Linear(1, 1)])
    layers.extend([nn.ReLU(), nn.Linear(1, 2)])
    layers.insert(1, nn.Tanh())
    assert [type(m).__name__ for m in layers] == ["Linear", "Tanh", "ReLU", "Linear"]
    assert "3.weight" in nn.Sequential(*layers).state_dict() and "3.weight" in layers.state_dict()


def test_relu_inplace_writes_into_a_tensor_without_grad():
    x = strata.tensor([-1.0, 2.0])
    out = nn.ReLU(inplace=True)(x)
    assert out is x and x.tolist() == [0.0, 2.0]
    y = strata.tensor([-1.0, 3.0])
    assert F.dropout(y, 0.0, training=True, inplace=True) is y


def test_relu_inplace_on_a_graph_writes_the_input_with_pytorchs_gradients():
    # Note [inplace= as a recorded write]
    w = strata.tensor([-1.0, 2.0], requires_grad=True)
    h = w * 3
    out = F.relu(h, inplace=True)
    assert out is h and h.tolist() == [0.0, 6.0]
    (out * out).sum().backward()
    assert w.grad.tolist() == [0.0, 36.0]
    with pytest.raises(strata.Error):
        nn.LeakyReLU(inplace=True)(w)  # a leaf that requires grad: PyTorch's error too


def test_init_functions_fill_in_place_without_recording_a_graph():
    w = nn.Parameter(strata.empty(64, 32))
    for fill in (lambda t: nn.init.uniform_(t, -0.5, 0.5), nn.init.xavier_uniform_,
                 lambda t: nn.init.kaiming_uniform_(t, a=math.sqrt(5)), nn.init.xavier_normal_,
                 lambda t: nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
                 lambda t: nn.init.trunc_normal_(t, std=0.02), lambda t: nn.init.normal_(t, 0.0, 0.1)):
        assert fill(w) is w
        assert w.is_leaf and w.grad_fn is None and w.requires_grad
    bound = math.sqrt(6 / (64 + 32))
    nn.init.xavier_uniform_(w)
    assert float(w.abs().max()) <= bound
    nn.init.trunc_normal_(w, mean=0.0, std=1.0, a=-0.5, b=0.5)
    assert float(w.abs().max()) <= 0.5
    nn.init.constant_(w, 0.25)
    assert float(w.min()) == float(w.max()) == 0.25
    nn.init.zeros_(w)
    nn.init.ones_(w.detach()[0])
    assert float(w.sum()) == 32.0
    assert nn.init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert nn.init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))


def test_init_is_reproducible_under_manual_seed():
    a, b = strata.empty(5, 5), strata.empty(5, 5)
    strata.manual_seed(3)
    nn.init.trunc_normal_(a)
    strata.manual_seed(3)
    nn.init.trunc_normal_(b)
    assert a.tolist() == b.tolist()


def test_conv1d_has_pytorchs_parameter_shapes_and_initial_range():
    conv = nn.Conv1d(4, 6, 3, padding="same", groups=2)
    assert conv.weight.shape == (6, 2, 3) and conv.bias.shape == (6,)
    assert float(conv.weight.abs().max()) <= 1 / math.sqrt(2 * 3)
    assert conv(strata.randn(2, 4, 10)).shape == (2, 6, 10)
    assert conv(strata.randn(4, 10)).shape == (6, 10)  # unbatched, as PyTorch
    assert nn.Conv1d(4, 6, 3, bias=False).bias is None


def test_embedding_padding_idx_row_starts_at_zero_and_from_pretrained_freezes():
    e = nn.Embedding(5, 3, padding_idx=-1)
    assert e.padding_idx == 4 and e.weight[4].tolist() == [0.0, 0.0, 0.0]
    table = strata.arange(6.0).reshape(3, 2)
    frozen = nn.Embedding.from_pretrained(table)
    assert frozen(strata.tensor([2])).tolist() == [[4.0, 5.0]] and not frozen.weight.requires_grad


def test_bce_with_logits_pos_weight_is_a_buffer():
    loss = nn.BCEWithLogitsLoss(pos_weight=strata.tensor([2.0]))
    assert list(loss.state_dict()) == ["pos_weight"]


@pytest.mark.parametrize("make, error", [
    (lambda: nn.Conv2d(1, 1, 3, stride=2, padding="same"), ValueError),
    (lambda: nn.Conv2d(1, 1, 3, padding="full"), ValueError),
    (lambda: nn.Conv2d(1, 1, 3, padding_mode="reflect"), NotImplementedError),
    (lambda: nn.Conv1d(3, 2, 3, groups=2), ValueError),
    (lambda: nn.MaxPool2d(2, dilation=2), NotImplementedError),
    (lambda: nn.Embedding(4, 2, max_norm=1.0), NotImplementedError),
    (lambda: nn.Embedding(4, 2, padding_idx=4), ValueError),
    (lambda: nn.CrossEntropyLoss(reduction="avg"), ValueError),
    (lambda: nn.BatchNorm1d(3)(strata.ones(2, 3, 4, 5)), ValueError),
    (lambda: F.binary_cross_entropy(strata.tensor([1.5]), strata.tensor([1.0])), strata.Error),
    (lambda: F.binary_cross_entropy(strata.tensor([0.5]), strata.tensor([1.0, 0.0])), ValueError),
    (lambda: F.cross_entropy(strata.ones(2, 3), strata.tensor([0, 1]), weight=strata.ones(4)), strata.ShapeError),
    (lambda: F.cross_entropy(strata.ones(2, 3), strata.tensor([0, 5]), weight=strata.ones(3)), strata.IndexError),
    (lambda: F.conv1d(strata.ones(1, 1, 1, 4), strata.ones(1, 1, 2)), strata.ShapeError),
    (lambda: F.pad(strata.ones(2, 3), (1, 2, 3)), ValueError),
    (lambda: F.pad(strata.ones(2, 3), (3, 0), mode="reflect"), ValueError),
    (lambda: nn.init.trunc_normal_(strata.ones(2), std=0.0), ValueError),
    (lambda: nn.init.kaiming_uniform_(strata.ones(2, 2), mode="fan_avg"), ValueError),
    (lambda: nn.init.orthogonal_(strata.ones(2, 2)), NotImplementedError),
    (lambda: nn.Linear(1, 1).register_forward_hook(3), TypeError),
])
def test_refusals_are_typed_errors(make, error):
    with pytest.raises(error):
        make()


def test_dropout_reads_p_and_training_when_called():
    drop = nn.Dropout(0.5)
    drop.p = 0.0
    x = strata.ones(1000)
    assert drop(x).tolist() == x.tolist()
    drop.p = 1.0
    assert float(drop(x).sum()) == 0.0
    drop.training = False
    assert drop(x).tolist() == x.tolist()


def test_recurrent_layers_have_pytorchs_parameter_names_and_shapes():
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    assert list(lstm.state_dict())[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                           "weight_ih_l0_reverse"]
    assert lstm.weight_ih_l1.shape == (16, 8) and lstm.weight_hh_l1_reverse.shape == (16, 4)
    out, (h, c) = lstm(strata.randn(5, 2, 3))
    assert out.shape == (5, 2, 8) and h.shape == c.shape == (4, 2, 4)
    assert float(lstm.weight_ih_l0.abs().max()) <= 0.5
    gru = nn.GRU(3, 4, batch_first=True)
    out, h = gru(strata.randn(2, 7, 3))
    assert out.shape == (2, 7, 4) and h.shape == (1, 2, 4)
    with pytest.raises(NotImplementedError):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError):
        gru(strata.randn(2, 7, 3), strata.zeros(2, 2, 4))


def test_more_layers_have_pytorchs_shapes_and_refusals():
    up = nn.ConvTranspose2d(4, 8, 4, stride=2, padding=1)
    assert up.weight.shape == (4, 8, 4, 4) and up(strata.randn(1, 4, 5, 5)).shape == (1, 8, 10, 10)
    assert nn.Upsample(scale_factor=2, mode="bilinear")(strata.ones(1, 1, 2, 3)).tolist() == [[[[1.0] * 6] * 4]]
    assert nn.Unflatten(1, (2, 3))(strata.ones(4, 6)).shape == (4, 2, 3)
    gn = nn.GroupNorm(2, 4)
    assert list(gn.state_dict()) == ["weight", "bias"] and gn(strata.randn(3, 4, 5)).shape == (3, 4, 5)
    prelu = nn.PReLU()
    assert prelu(strata.tensor([-4.0, 2.0])).tolist() == [-1.0, 2.0] and prelu.weight.requires_grad
    vector = nn.utils.parameters_to_vector(gn.parameters())
    nn.utils.vector_to_parameters(vector * 0 + 3, gn.parameters())
    assert gn.weight.tolist() == [3.0] * 4
    with pytest.raises(NotImplementedError):
        nn.utils.rnn.pack_padded_sequence(strata.ones(2, 3), [3, 2])
    with pytest.raises(NotImplementedError):
        F.interpolate(strata.ones(1, 1, 2, 2), scale_factor=2, mode="bicubic")
    with pytest.raises(ValueError):
        nn.GroupNorm(3, 4)


def test_attention_layers_have_pytorchs_names_and_refusals():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    keys = list(nn.TransformerEncoder(layer, 2).state_dict())
    assert keys[:4] == ["layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias",
                        "layers.0.self_attn.out_proj.weight", "layers.0.self_attn.out_proj.bias"]
    assert "layers.1.norm2.bias" in keys
    out, weights = nn.MultiheadAttention(8, 2, batch_first=True)(strata.ones(3, 4, 8), strata.ones(3, 5, 8),
                                                                 strata.ones(3, 5, 8))
    assert out.shape == (3, 4, 8) and weights.shape == (3, 4, 5)
    assert weights.sum(-1).reshape(-1).tolist() == pytest.approx([1.0] * 12)
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert mask.tolist() == [[0.0, -math.inf, -math.inf], [0.0, 0.0, -math.inf], [0.0, 0.0, 0.0]]
    with pytest.raises(ValueError):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(NotImplementedError):
        nn.MultiheadAttention(8, 2, kdim=4)
    with pytest.raises(NotImplementedError):
        nn.Transformer()


def test_same_padding_with_an_even_kernel_survives_fusion():
    model = nn.Sequential(nn.Conv2d(1, 2, 4, padding="same"), nn.ReLU())
    x = strata.randn(1, 1, 6, 6)
    plain = model(x)
    fused = model.fuse()(x)
    assert fused.shape == plain.shape == (1, 2, 6, 6) and strata.allclose(fused, plain, atol=1e-6)


def test_channel_dropout_and_refused_pooling_options():
    out = nn.Dropout2d(0.5)(strata.ones(2, 16, 3, 3))
    for image in out:
        for channel in image:
            assert len(set(channel.reshape(-1).tolist())) == 1  # a channel is dropped or kept whole
    assert set(out.reshape(-1).tolist()) <= {0.0, 2.0}
    assert nn.Dropout2d(0.5).eval()(strata.ones(1, 2, 2, 2)).tolist() == strata.ones(1, 2, 2, 2).tolist()
    assert F.one_hot(strata.tensor([0, 3])).shape == (2, 4)
    assert nn.Identity(5, unused=True)(strata.ones(1)).tolist() == [1.0]
    with pytest.raises(NotImplementedError):
        nn.AvgPool2d(3, ceil_mode=True)
    with pytest.raises(NotImplementedError):
        nn.AvgPool2d(3, padding=1, count_include_pad=False)
    with pytest.raises(ValueError):
        F.gelu(strata.ones(1), approximate="sigmoid")
