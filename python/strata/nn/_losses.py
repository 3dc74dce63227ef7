"""The loss functions of strata.nn.functional. Cross-entropy, NLL and MSE run Strata's C++ losses; class weights,
probability targets and the binary and robust losses are composed from differentiable ops, with PyTorch's formulas
(aten/src/ATen/native/Loss.cpp, LossNLL.cpp) so that values and gradients match."""
import strata
from strata import _C
from strata.nn._math import _where, softplus

_REDUCTIONS = ("none", "mean", "sum")


def _reduce(loss, reduction, op):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return loss if reduction == "none" else loss.mean() if reduction == "mean" else loss.sum()


def _check_same_size(input, target, op):
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"{op}: using a target size ({tuple(target.shape)}) that is different to the input size "
                         f"({tuple(input.shape)}); please ensure they have the same size")


def mse_loss(input, target, reduction="mean"):
    return _C.nn.functional.mse_loss(input, target, reduction)


def l1_loss(input, target, reduction="mean"):
    _check_same_size(input, target, "l1_loss")
    return _reduce((input - target).abs(), reduction, "l1_loss")


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    _check_same_size(input, target, "smooth_l1_loss")
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction, "smooth_l1_loss")
    return _reduce(strata.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction, "smooth_l1_loss")


def huber_loss(input, target, reduction="mean", delta=1.0):
    _check_same_size(input, target, "huber_loss")
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    d = (input - target).abs()
    return _reduce(strata.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction, "huber_loss")


def _safe_log(x):
    # PyTorch clamps BCE's logs at -100, so that 0 and 1 give a finite loss; log never sees 0 here (Note [Gradients
    # through where] in _math.py), so saturated probabilities give a finite gradient too.
    positive = x > 0
    return _where(positive, strata.log(_where(positive, x, 1.0)), -100.0).clamp(min=-100.0)


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    _check_same_size(input, target, "binary_cross_entropy")
    if bool(((input < 0) | (input > 1)).sum() > 0):
        raise strata.InvalidArgumentError("binary_cross_entropy: all elements of input should be between 0 and 1 "
                                          "(for logits, use binary_cross_entropy_with_logits)")
    x = input.detach()
    loss = -(target * _safe_log(x) + (1 - target) * _safe_log(1 - x))
    # The input's gradient is PyTorch's closed form (x - y) / max(x (1 - x), 1e-12), which stays finite and equal
    # to PyTorch's where x saturates at 0 or 1 (the log's own gradient would differ there): the value is the loss,
    # and the term input * g - (input * g).detach() adds 0 to it and g to the input's gradient.
    g = ((x - target) / (x * (1 - x)).clamp(min=1e-12)).detach()
    loss = loss + (input * g - (input * g).detach())
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """(1 - y) x + (1 + (pos_weight - 1) y) softplus(-x): stable for logits of any size."""
    _check_same_size(input, target, "binary_cross_entropy_with_logits")
    sp = softplus(-input)
    if pos_weight is not None:
        loss = (1 - target) * input + (target * (pos_weight - 1) + 1) * sp
    else:
        loss = (1 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def _class_view(weight, input):
    """The weight [C] shaped to broadcast over the class dim of input [N, C, d...]."""
    return weight.reshape([1, weight.shape[0]] + [1] * (input.dim() - 2))


def _check_weight(weight, input, op):
    if weight.dim() != 1 or weight.shape[0] != input.shape[1]:
        raise strata.ShapeError(f"{op}: weight should be defined for all {input.shape[1]} classes, got a weight of "
                                f"shape {tuple(weight.shape)}")


def _weighted_nll(log_probs, target, weight, ignore_index, reduction):
    """PyTorch's nll_loss with class weights: -w[y] log p[y], the mean divided by the sum of w[y] counted."""
    ignored = target == ignore_index
    safe_target = _where(ignored, 0, target)
    bad = (safe_target < 0) | (safe_target >= log_probs.shape[1])
    if bool(bad.sum() > 0):
        first = next(v for v in safe_target.flatten().tolist() if not 0 <= v < log_probs.shape[1])
        raise strata.IndexError(f"nll_loss: target {first} is out of bounds for {log_probs.shape[1]} classes")
    picked = log_probs.gather(1, safe_target.unsqueeze(1)).squeeze(1)
    w = weight.index_select(0, safe_target.flatten()).reshape(tuple(target.shape))
    w = strata.where(ignored, strata.zeros_like(w), w)
    loss = -(picked * w)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / w.sum()


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    if weight is None:
        return _C.nn.functional.nll_loss(input, target, reduction, ignore_index)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"nll_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    _check_weight(weight, input, "nll_loss")
    return _weighted_nll(input, target, weight, ignore_index, reduction)


def _probability_cross_entropy(input, target, weight, reduction, label_smoothing):
    n_classes = input.shape[1]
    log_probs = strata.log_softmax(input, 1)
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / n_classes
    product = log_probs * target
    if weight is not None:
        product = product * _class_view(weight, input)
    loss = -product.sum(1)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / (input.numel() // n_classes)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Class indices or (floating target of input's shape) class probabilities; optional class weights."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if weight is not None:
        _check_weight(weight, input, "cross_entropy")
    if target.is_floating_point():
        _check_same_size(input, target, "cross_entropy with class probabilities")
        return _probability_cross_entropy(input, target, weight, reduction, label_smoothing)
    if weight is None:
        return _C.nn.functional.cross_entropy(input, target, reduction, label_smoothing, ignore_index)
    log_probs = strata.log_softmax(input, 1)
    nll = _weighted_nll(log_probs, target, weight, ignore_index, reduction)
    if label_smoothing == 0:
        return nll
    # PyTorch's cross_entropy_loss_label_smoothing: the smoothing term weighted by class, normalised as the NLL.
    ignored = target == ignore_index
    smooth = -(log_probs * _class_view(weight, input)).sum(1)
    smooth = strata.where(ignored, strata.zeros_like(smooth), smooth)
    if reduction == "mean":
        safe_target = _where(ignored, 0, target)
        w = weight.index_select(0, safe_target.flatten()).reshape(tuple(target.shape))
        smooth = smooth.sum() / strata.where(ignored, strata.zeros_like(w), w).sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / input.shape[1])


def kl_div(input, target, reduction="mean", log_target=False):
    """target (log target) against log-probabilities input: target (log target - input), 0 where target is 0."""
    if reduction not in _REDUCTIONS + ("batchmean",):
        raise ValueError(f"kl_div: reduction must be 'mean', 'batchmean', 'sum' or 'none', got {reduction!r}")
    if log_target:
        loss = strata.exp(target) * (target - input)
    else:
        positive = target > 0
        loss = _where(positive, target * (strata.log(_where(positive, target, 1.0)) - input), 0.0)
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.dim() else loss.sum()
    return _reduce(loss, reduction, "kl_div")
