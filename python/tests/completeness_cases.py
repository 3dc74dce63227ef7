"""Cases of issue 37's completeness list, written once against PyTorch's API so that the same code runs with
`torch` and with `strata`: each case takes the library and returns named arrays (values and gradients).

    # re-record the reference with a Python that has PyTorch 2.15 and NumPy 1.24 (the inputs' generator):
    python3 python/tests/completeness_cases.py --record
writes completeness_reference.json beside this file; test_completeness_reference.py compares Strata with it.
"""

import numpy as np

from pytorch_reference import CaseSet, data, leaf  # noqa: F401 (the cases' helpers)

CASE_SET = CaseSet("completeness_reference.json")
CASES, REFERENCE, case = CASE_SET.cases, CASE_SET.reference, CASE_SET.case


def grads_of(lib, output, *inputs):
    """The output, and each input's gradient for a fixed upstream gradient."""
    upstream = lib.tensor(data(*output.shape, seed=99)) if output.dim() else lib.tensor(1.0)
    output.backward(upstream)
    result = {"value": output.detach().numpy()}
    for i, t in enumerate(inputs):
        result[f"grad{i}"] = t.grad.numpy() if t.grad is not None else np.zeros(t.shape, np.float32)
    return result


def probabilities(seed):
    p = 1 / (1 + np.exp(-data(4, 5, seed=seed) * 2))
    p[0, :2] = [0.0, 1.0]  # saturated, as sigmoid gives in float32
    return p.astype(np.float32)


targets01 = (np.random.default_rng(5).random((4, 5)) > 0.5).astype(np.float32)
classes = np.array([0, 4, -100, 2, 1, 3], dtype=np.int64)
class_weight = (data(5, seed=6) ** 2 + 0.1).astype(np.float32)


@case
def activations(lib):
    F = lib.nn.functional
    x = data(4, 6)
    x[0, 0] = 0.0
    out = {}
    for name, f in [("leaky_relu", lambda t: F.leaky_relu(t, 0.2)), ("silu", F.silu), ("elu", F.elu),
                    ("softplus", lambda t: F.softplus(t * 10)), ("relu6", lambda t: F.relu6(t * 5)),
                    ("module_leaky", lib.nn.LeakyReLU()), ("module_silu", lib.nn.SiLU())]:
        t = leaf(lib, x)
        for k, v in grads_of(lib, f(t), t).items():
            out[f"{name}.{k}"] = v
    return out


@case
def bce(lib):
    F, p = lib.nn.functional, leaf(lib, probabilities(1))
    loss = F.binary_cross_entropy(p, lib.tensor(targets01), weight=lib.tensor(class_weight))
    return grads_of(lib, loss, p)


@case
def bce_module_none(lib):
    p = leaf(lib, probabilities(2))
    return grads_of(lib, lib.nn.BCELoss(reduction="none")(p, lib.tensor(targets01)), p)


@case
def bce_with_logits(lib):
    x = leaf(lib, data(4, 5, seed=3, scale=20))
    loss = lib.nn.BCEWithLogitsLoss(pos_weight=lib.tensor(class_weight))(x, lib.tensor(targets01))
    return grads_of(lib, loss, x)


@case
def bce_with_logits_zero_logits(lib):
    x = leaf(lib, np.zeros((3, 2), np.float32))
    return grads_of(lib, lib.nn.functional.binary_cross_entropy_with_logits(x, lib.ones(3, 2)), x)


@case
def l1_smooth_l1_huber(lib):
    out = {}
    for name, loss in [("l1", lib.nn.L1Loss()), ("smooth", lib.nn.SmoothL1Loss(beta=0.5)),
                       ("smooth_sum", lib.nn.SmoothL1Loss(reduction="sum")), ("huber", lib.nn.HuberLoss(delta=0.7))]:
        x = leaf(lib, data(4, 5, seed=7))
        for k, v in grads_of(lib, loss(x, lib.tensor(data(4, 5, seed=8))), x).items():
            out[f"{name}.{k}"] = v
    return out


@case
def cross_entropy_weighted(lib):
    out = {}
    for reduction in ("mean", "sum", "none"):
        for smoothing in (0.0, 0.2):
            x = leaf(lib, data(6, 5, seed=9))
            loss = lib.nn.CrossEntropyLoss(weight=lib.tensor(class_weight), reduction=reduction,
                                           label_smoothing=smoothing)(x, lib.tensor(classes))
            for k, v in grads_of(lib, loss, x).items():
                out[f"{reduction}.{smoothing}.{k}"] = v
    return out


@case
def cross_entropy_probabilities(lib):
    target = np.abs(data(6, 5, seed=10))
    target /= target.sum(1, keepdims=True)
    x = leaf(lib, data(6, 5, seed=11))
    loss = lib.nn.functional.cross_entropy(x, lib.tensor(target), weight=lib.tensor(class_weight), label_smoothing=0.1)
    return grads_of(lib, loss, x)


@case
def nll_weighted(lib):
    x = leaf(lib, data(6, 5, seed=12))
    loss = lib.nn.NLLLoss(weight=lib.tensor(class_weight))(lib.log_softmax(x, 1), lib.tensor(classes))
    return grads_of(lib, loss, x)


@case
def batch_norm_1d(lib):
    lib.manual_seed(0)
    out = {}
    for shape in ((6, 3), (4, 3, 5)):
        bn = lib.nn.BatchNorm1d(3)
        x = leaf(lib, data(*shape, seed=13))
        for k, v in grads_of(lib, bn(x), x).items():
            out[f"{len(shape)}d.train.{k}"] = v
        out[f"{len(shape)}d.running_mean"] = bn.running_mean.numpy()
        out[f"{len(shape)}d.running_var"] = bn.running_var.numpy()
        bn.eval()
        out[f"{len(shape)}d.eval"] = bn(lib.tensor(data(*shape, seed=14))).detach().numpy()
    return out


@case
def conv1d(lib):
    F, out = lib.nn.functional, {}
    for name, kwargs, k in [("strided", dict(stride=2, padding=1), 3), ("same_dilated", dict(padding="same",
                                                                                             dilation=2), 3),
                            ("same_even", dict(padding="same"), 4), ("groups", dict(groups=3), 2)]:
        x, w, b = leaf(lib, data(2, 3, 9, seed=15)), leaf(lib, data(6, 3 // kwargs.get("groups", 1), k, seed=16)), \
            leaf(lib, data(6, seed=17))
        for key, v in grads_of(lib, F.conv1d(x, w, b, **kwargs), x, w, b).items():
            out[f"{name}.{key}"] = v
    return out


@case
def conv2d_same(lib):
    x, w = leaf(lib, data(2, 3, 7, 6, seed=18)), leaf(lib, data(4, 3, 4, 3, seed=19))
    return grads_of(lib, lib.nn.functional.conv2d(x, w, padding="same"), x, w)


@case
def max_pool_ceil_mode(lib):
    out = {}
    for k, s, p in ((2, 2, 0), (3, 2, 1), (3, 3, 0), (2, 3, 1)):
        x = leaf(lib, data(1, 2, 7, 8, seed=20))
        for key, v in grads_of(lib, lib.nn.MaxPool2d(k, s, p, ceil_mode=True)(x), x).items():
            out[f"{k}{s}{p}.{key}"] = v
    return out


@case
def pad_modes(lib):
    out = {}
    for mode in ("constant", "reflect", "replicate", "circular"):
        x = leaf(lib, data(1, 2, 4, 5, seed=21))
        for key, v in grads_of(lib, lib.nn.functional.pad(x, (1, 2, 2, 1), mode=mode), x).items():
            out[f"{mode}.{key}"] = v
    return out


@case
def embedding_padding_idx(lib):
    w = leaf(lib, data(6, 3, seed=22))
    index = lib.tensor(np.array([[0, 2, 5], [2, 2, 1]]))
    return grads_of(lib, lib.nn.functional.embedding(index, w, padding_idx=2), w)


@case
def rounding_and_trigonometry(lib):
    x = data(5, 6, seed=23, scale=3)
    x[0, :4] = [0.5, 1.5, -2.5, 2.0]
    out = {}
    for name in ("round", "floor", "ceil", "trunc", "sin", "cos"):
        t = leaf(lib, x)
        for key, v in grads_of(lib, getattr(lib, name)(t), t).items():
            out[f"{name}.{key}"] = v
    out["sin_large"] = lib.sin(lib.tensor(data(50, seed=24, scale=100))).numpy()
    return out


@case
def remainder_and_floor_division(lib):
    a, b = data(4, 5, seed=25, scale=3), data(4, 5, seed=26, scale=3)
    ta, tb = leaf(lib, a), leaf(lib, b)
    out = {f"rem.{k}": v for k, v in grads_of(lib, ta % tb, ta, tb).items()}
    out["floordiv"] = (lib.tensor(a) // lib.tensor(b)).numpy()
    out["scalar_rem"] = (lib.tensor(a) % -1.5).numpy()
    ints = lib.tensor(np.array([7, -7, 8, -9])), lib.tensor(np.array([3, 3, -3, -4]))
    out["int_rem"], out["int_floordiv"] = (ints[0] % ints[1]).numpy(), (ints[0] // ints[1]).numpy()
    return out


@case
def reductions(lib):
    out = {}
    for name, f in [("std", lambda t: t.std()), ("std_dim", lambda t: t.std(1, keepdim=True)),
                    ("cumsum", lambda t: t.cumsum(1)), ("prod", lambda t: (t / 2).prod(1)),
                    ("max_values", lambda t: t.max(1).values), ("topk", lambda t: t.topk(2).values),
                    ("sort", lambda t: t.sort(0, descending=True).values),
                    ("masked_select", lambda t: t.masked_select(t > 0)),
                    ("masked_fill", lambda t: t.masked_fill(t > 0, 2.0)),
                    ("where_scalar", lambda t: lib.where(t > 0, t, 0.0)), ("repeat", lambda t: t.repeat(2, 1, 2))]:
        t = leaf(lib, data(4, 5, seed=27))
        for key, v in grads_of(lib, f(t), t).items():
            out[f"{name}.{key}"] = v
    t = lib.tensor(data(4, 5, seed=27))
    out["max_indices"], out["argsort"] = t.max(1).indices.numpy(), t.argsort(1).numpy()
    out["nonzero"], out["where1"] = (t > 0).nonzero().numpy(), lib.where(t > 0)[1].numpy()
    return out


@case
def elementwise_and_linear_algebra(lib):
    x, out = data(4, 5, seed=30, scale=3), {}
    x[0, :2] = [0.0, 1e-7]
    p = (np.abs(data(4, 5, seed=31)) / 10 + 0.05).astype(np.float32)
    for name, f, source in [("sign", lambda t: t.sign(), x), ("square", lambda t: lib.square(t), x),
                            ("reciprocal", lambda t: t.reciprocal(), x + 10), ("expm1", lambda t: lib.expm1(t), x),
                            ("sinh", lambda t: t.sinh(), x), ("cosh", lambda t: lib.cosh(t), x),
                            ("log1p", lambda t: t.log1p(), p), ("log2", lambda t: lib.log2(t), p),
                            ("logit", lambda t: lib.logit(t), p), ("frac", lambda t: t.frac(), x),
                            ("addcdiv", lambda t: t.addcdiv(t, t + 10, value=0.5), x),
                            ("lerp", lambda t: lib.lerp(t, t * 2, 0.3), x),
                            ("tril", lambda t: t.tril(-1), x), ("triu", lambda t: lib.triu(t, 2), x),
                            ("diag", lambda t: lib.diag(t, 1), x), ("diag1d", lambda t: lib.diag(t[0], -1), x),
                            ("trace", lambda t: lib.trace(t), x), ("flip", lambda t: lib.flip(t, [0, 1]), x),
                            ("roll", lambda t: lib.roll(t, 2, 1), x), ("outer", lambda t: lib.outer(t[0], t[1]), x),
                            ("dot", lambda t: lib.dot(t[0], t[1]), x), ("mv", lambda t: lib.mv(t, t[0]), x),
                            ("cumprod", lambda t: (t / 3).cumprod(1), x), ("amax", lambda t: lib.amax(t, 1), x),
                            ("repeat_interleave", lambda t: t.repeat_interleave(2, dim=1), x),
                            ("index_add", lambda t: t.index_add(0, lib.tensor(np.array([0, 2])), t[:2], alpha=2), x),
                            ("scatter", lambda t: t.scatter(1, lib.tensor(np.array([[1], [0], [3], [2]])),
                                                            t[:, :1] * 2), x),
                            ("sum_axis_keepdims", lambda t: t.sum(axis=1, keepdims=True), x)]:
        t = leaf(lib, source)
        for key, v in grads_of(lib, f(t), t).items():
            out[f"{name}.{key}"] = v
    special = lib.tensor(np.array([1.0, np.nan, np.inf, -np.inf, -2.0], dtype=np.float32))
    out["nan_to_num"], out["isfinite"] = lib.nan_to_num(special).numpy(), lib.isfinite(special).numpy()
    one_hot = lib.zeros(3, 4).scatter_(1, lib.tensor(np.array([[1], [0], [3]])), 1.0)
    out["one_hot_scatter_"], out["meshgrid_xy"] = one_hot.numpy(), lib.meshgrid(lib.arange(3), lib.arange(2),
                                                                               indexing="xy")[0].numpy()
    return out


@case
def recurrent(lib):
    out = {}
    for name, make, shape in [("rnn", lambda: lib.nn.RNN(3, 4, 2, nonlinearity="relu", bidirectional=True), (5, 2, 3)),
                              ("lstm", lambda: lib.nn.LSTM(3, 4, 2, batch_first=True), (2, 5, 3)),
                              ("gru", lambda: lib.nn.GRU(3, 4, bidirectional=True), (5, 3)),
                              ("lstm_cell", lambda: lib.nn.LSTMCell(3, 4), (2, 3)),
                              ("gru_cell", lambda: lib.nn.GRUCell(3, 4, bias=False), (2, 3))]:
        module = make()
        with lib.no_grad():
            for i, (key, p) in enumerate(module.named_parameters()):
                p.copy_(lib.tensor(data(*p.shape, seed=40 + i, scale=0.3)))
        x = leaf(lib, data(*shape, seed=50))
        result = module(x)
        first = result[0] if isinstance(result, tuple) else result
        for key, v in grads_of(lib, first, x).items():
            out[f"{name}.{key}"] = v
        out[f"{name}.names"] = np.array([len(k) for k, _ in module.named_parameters()])
    return out


@case
def upsampling_and_normalisation(lib):
    F, out = lib.nn.functional, {}
    x = data(2, 6, 5, 4, seed=60)
    for name, f, inputs in [
            ("conv_transpose", lambda t, w: F.conv_transpose2d(t, w, stride=2, padding=1, output_padding=1,
                                                               groups=2), [x, data(6, 2, 3, 3, seed=61)]),
            ("group_norm", lambda t, w: F.group_norm(t, 3, w, w * 2), [x, data(6, seed=62)]),
            ("nearest", lambda t: F.interpolate(t, scale_factor=2), [x]),
            ("bilinear", lambda t: F.interpolate(t, size=(7, 9), mode="bilinear"), [x]),
            ("bilinear_corners", lambda t: F.interpolate(t, scale_factor=0.5, mode="bilinear", align_corners=True),
             [x]),
            ("cosine", lambda a, b: F.cosine_similarity(a, b), [data(4, 6, seed=63), data(4, 6, seed=64)]),
            ("kl_div", lambda a: F.kl_div(lib.log_softmax(a, 1), lib.softmax(lib.tensor(data(4, 6, seed=65)), 1),
                                          reduction="batchmean"), [data(4, 6, seed=66)])]:
        tensors = [leaf(lib, a) for a in inputs]
        for key, v in grads_of(lib, f(*tensors), *tensors).items():
            out[f"{name}.{key}"] = v
    sequences = [lib.tensor(data(n, 3, seed=n)) for n in (4, 2, 5)]
    out["pad_sequence"] = lib.nn.utils.rnn.pad_sequence(sequences, batch_first=True, padding_value=-1).numpy()
    return out


@case
def attention(lib):
    out = {}
    padding = np.zeros((3, 5), dtype=bool)
    padding[0, 3:] = True
    for name, make, call in [
            ("mha", lambda: lib.nn.MultiheadAttention(8, 2),
             lambda m, x: m(x, x, x, key_padding_mask=lib.tensor(padding), average_attn_weights=False)),
            ("encoder", lambda: lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(8, 2, 16, 0.0), 2),
             lambda m, x: m(x, mask=lib.nn.Transformer.generate_square_subsequent_mask(5))),
            ("encoder_norm_first_gelu", lambda: lib.nn.TransformerEncoderLayer(8, 2, 16, 0.0, "gelu", norm_first=True),
             lambda m, x: m(x, src_key_padding_mask=lib.tensor(padding)))]:
        module = make()
        with lib.no_grad():
            for i, (key, p) in enumerate(module.named_parameters()):
                if "norm" not in key:
                    p.copy_(lib.tensor(data(*p.shape, seed=70 + i, scale=0.3)))
        module.eval()
        x = leaf(lib, data(5, 3, 8, seed=80))
        result = call(module, x)
        if isinstance(result, tuple):
            out[f"{name}.weights"] = result[1].detach().numpy()
            result = result[0]
        for key, v in grads_of(lib, result, x).items():
            out[f"{name}.{key}"] = v
    q, k, v = (leaf(lib, data(2, 2, n, 8, seed=90 + n)) for n in (4, 6, 7))
    v = leaf(lib, data(2, 2, 6, 8, seed=97))
    for key, value in grads_of(lib, lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
                               q, k, v).items():
        out[f"sdpa.{key}"] = value
    return out


@case
def more_activations(lib):
    x = data(2, 4, 5, 6, seed=100, scale=3)
    x[0, 0, 0, :3] = [0.0, 3.0, -3.0]
    out = {}
    for name, args in [("Hardtanh", ()), ("Softsign", ()), ("LogSigmoid", ()), ("Mish", ()), ("Hardswish", ()),
                       ("Hardsigmoid", ()), ("Softmin", (1,)), ("Tanhshrink", ()), ("Threshold", (0.1, 20.0)),
                       ("GLU", (1,)), ("SELU", ()), ("CELU", (0.5,)), ("Softshrink", ()), ("Hardshrink", (0.3,)),
                       ("AdaptiveMaxPool2d", ((2, 4),)), ("GELU", ("tanh",)), ("LogSoftmax", (2,))]:
        t = leaf(lib, x)
        for key, v in grads_of(lib, getattr(lib.nn, name)(*args)(t), t).items():
            out[f"{name}.{key}"] = v
    return out


def _train(lib, make_optimizer):
    w = leaf(lib, data(3, 4, seed=28))
    x = lib.tensor(data(8, 3, seed=29))
    optimizer = make_optimizer(lib, w)
    for _ in range(15):
        optimizer.zero_grad()
        ((x @ w).tanh() ** 2).sum().backward()
        optimizer.step()
    return w.detach().numpy()


@case
def optimizers(lib):
    return {
        "rmsprop": _train(lib, lambda L, w: L.optim.RMSprop([w], lr=0.01)),
        "rmsprop_momentum_wd": _train(lib, lambda L, w: L.optim.RMSprop([w], lr=0.01, momentum=0.9,
                                                                         weight_decay=0.1)),
        "rmsprop_centered": _train(lib, lambda L, w: L.optim.RMSprop([w], lr=0.01, centered=True, alpha=0.9,
                                                                      momentum=0.5)),
        "adagrad": _train(lib, lambda L, w: L.optim.Adagrad([w], lr=0.1)),
        "adagrad_all": _train(lib, lambda L, w: L.optim.Adagrad([w], lr=0.1, lr_decay=0.01, weight_decay=0.1,
                                                                 initial_accumulator_value=0.5)),
    }


def _lrs(lib, make_scheduler, metrics=None):
    optimizer = lib.optim.SGD([leaf(lib, data(1))], lr=0.1)
    scheduler, lrs = make_scheduler(lib, optimizer), []
    for epoch in range(12):
        optimizer.step()
        scheduler.step(*([metrics[epoch]] if metrics else []))
        lrs.append(optimizer.param_groups[0]["lr"])
    return np.array(lrs)


@case
def schedulers(lib):
    plateau = [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85]
    get = lambda L, name: getattr(L.optim.lr_scheduler, name)  # noqa: E731
    return {
        "exponential": _lrs(lib, lambda L, o: get(L, "ExponentialLR")(o, 0.9)),
        "lambda": _lrs(lib, lambda L, o: get(L, "LambdaLR")(o, lambda e: 1 / (e + 1))),
        "multistep": _lrs(lib, lambda L, o: get(L, "MultiStepLR")(o, [3, 7], 0.5)),
        "plateau": _lrs(lib, lambda L, o: get(L, "ReduceLROnPlateau")(o, patience=2), plateau),
        "plateau_cooldown": _lrs(lib, lambda L, o: get(L, "ReduceLROnPlateau")(o, patience=1, cooldown=2,
                                                                               factor=0.5), plateau),
        "plateau_max_abs": _lrs(lib, lambda L, o: get(L, "ReduceLROnPlateau")(o, mode="max", patience=1,
                                                                              threshold_mode="abs",
                                                                              threshold=0.01), plateau),
        "linear": _lrs(lib, lambda L, o: get(L, "LinearLR")(o, 0.25, 1.0, 4)),
        "constant": _lrs(lib, lambda L, o: get(L, "ConstantLR")(o, 0.5, 3)),
        "polynomial": _lrs(lib, lambda L, o: get(L, "PolynomialLR")(o, 6, 2.0)),
        "warm_restarts": _lrs(lib, lambda L, o: get(L, "CosineAnnealingWarmRestarts")(o, 3, 2, 0.01)),
        "one_cycle": _lrs(lib, lambda L, o: get(L, "OneCycleLR")(o, 1.0, total_steps=12, cycle_momentum=False)),
        "sequential": _lrs(lib, lambda L, o: get(L, "SequentialLR")(
            o, [get(L, "LinearLR")(o, 0.1, total_iters=3), get(L, "ExponentialLR")(o, 0.8),
                get(L, "CosineAnnealingLR")(o, 4)], [3, 7])),
    }


if __name__ == "__main__":
    CASE_SET.main()
