"""strata.nn.functional: the DNN primitives as functions (torch.nn.functional). The convolution, pooling and
normalisation kernels are C++; what PyTorch adds around them (padding="same", ceil_mode, Conv1d, padding modes) and
the activations that Strata has no kernel for are composed here from differentiable ops."""
import math

import numpy as np

import strata
from strata import _C
from strata._C import sigmoid, tanh  # noqa: F401
from strata._C.nn.functional import adaptive_avg_pool2d, batch_norm, layer_norm, linear  # noqa: F401
from strata.nn._losses import (  # noqa: F401
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from strata.nn._math import log1p, softplus  # noqa: F401
from strata.nn.normalization import group_norm  # noqa: F401


# Note [inplace= as a recorded write]
# inplace=True writes the result into the input with copy_, which autograd records (version counters, history
# rebased as PyTorch's): the input holds the result, gradients flow as in PyTorch, and a leaf that requires grad is
# refused outside no_grad. Where a graph is recorded, the function runs on a clone, so that the values its backward
# saved are not the ones overwritten.
def _apply(function, input, inplace):
    if not inplace:
        return function(input)
    recorded = input.requires_grad and strata.is_grad_enabled()
    return input.copy_(function(input.clone() if recorded else input))


def relu(input, inplace=False):
    return _apply(_C.relu, input, inplace)


def relu_(input):
    return relu(input, inplace=True)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    # where, not max(x, a * x): the gradient at 0 is negative_slope, as PyTorch's.
    return _apply(lambda x: strata.where(x > 0, x, x * negative_slope), input, inplace)


def silu(input, inplace=False):
    return _apply(lambda x: x * _C.sigmoid(x), input, inplace)


def elu(input, alpha=1.0, inplace=False):
    def elu_of(x):
        negative = strata.where(x > 0, strata.zeros_like(x), x)
        return strata.where(x > 0, x, (strata.exp(negative) - 1) * alpha)

    return _apply(elu_of, input, inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    # No gradient at the bounds themselves, as PyTorch's hardtanh (clamp's passes it there).
    def hardtanh_of(x):
        return strata.where((x > min_val) & (x < max_val), x, x.clamp(min_val, max_val).detach())

    return _apply(hardtanh_of, input, inplace)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def mish(input, inplace=False):
    return _apply(lambda x: x * _C.tanh(softplus(x)), input, inplace)


def dropout(input, p=0.5, training=True, inplace=False):
    return _apply(lambda x: _C.nn.functional.dropout(x, p, training), input, inplace)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps).expand_as(input)


def _tuple(value, n, name):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n or not all(isinstance(v, int) for v in value):
        raise TypeError(f"{name} must be an int or a tuple of {n} ints, got {value!r}")
    return value


def _same_padding(kernel, dilation, stride, op):
    """PyTorch's padding="same": total d * (k - 1) per dim, half on each side and the odd one on the right."""
    if any(s != 1 for s in stride):
        raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    return tuple(t // 2 for t in totals), tuple(t % 2 for t in totals)


def _conv_padding(padding, kernel, dilation, stride, n, op):
    """(symmetric padding, extra padding on the right) for a padding argument: ints, "valid" or "same"."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * n, (0,) * n
        if padding == "same":
            return _same_padding(kernel, dilation, stride, op)
        raise ValueError(f"{op}: invalid padding string {padding!r}, should be one of 'valid', 'same'")
    return _tuple(padding, n, f"{op}: padding"), (0,) * n


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    stride, dilation = _tuple(stride, 2, "conv2d: stride"), _tuple(dilation, 2, "conv2d: dilation")
    kernel = tuple(weight.shape[2:]) if weight.dim() == 4 else (1, 1)
    sym, extra = _conv_padding(padding, kernel, dilation, stride, 2, "conv2d")
    if any(extra):
        input = pad(input, (0, extra[1], 0, extra[0]))
    return _C.nn.functional.conv2d(input, weight, bias, stride, sym, dilation, groups)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """A Conv2d over [N, C, 1, L] with a [O, C/groups, 1, k] weight: the same values and gradients."""
    if input.dim() not in (2, 3):
        raise strata.ShapeError(f"conv1d: expected a 2-D (unbatched) or 3-D (batched) input, got shape "
                                f"{tuple(input.shape)}")
    if weight.dim() != 3:
        raise strata.ShapeError(f"conv1d: weight must be 3-D [out_channels, in_channels / groups, kernel_size], "
                                f"got shape {tuple(weight.shape)}")
    unbatched = input.dim() == 2
    x = input.unsqueeze(0) if unbatched else input
    (s,), (d,) = _tuple(stride, 1, "conv1d: stride"), _tuple(dilation, 1, "conv1d: dilation")
    if isinstance(padding, str):
        (p,), (extra,) = _conv_padding(padding, (weight.shape[2],), (d,), (s,), 1, "conv1d")
    else:
        (p,), extra = _tuple(padding, 1, "conv1d: padding"), 0
    if extra:
        x = pad(x, (0, extra))
    y = _C.nn.functional.conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), (0, p), (1, d), groups).squeeze(2)
    return y.squeeze(0) if unbatched else y


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The gradient of conv2d with respect to its input, as a convolution: the input spread out by the stride (zeros
    between its values), padded by dilation * (k - 1) - padding, and convolved with the kernel flipped and its
    channels swapped. Differentiable through every step."""
    s, p = _tuple(stride, 2, "conv_transpose2d: stride"), _tuple(padding, 2, "conv_transpose2d: padding")
    op, d = _tuple(output_padding, 2, "conv_transpose2d: output_padding"), _tuple(dilation, 2, "dilation")
    if any(o >= max(si, di) for o, si, di in zip(op, s, d)):
        raise ValueError(f"conv_transpose2d: output_padding {op} must be smaller than stride {s} or dilation {d}")
    unbatched = input.dim() == 3
    x = input.unsqueeze(0) if unbatched else input
    if x.dim() != 4 or weight.dim() != 4 or x.shape[1] != weight.shape[0]:
        raise strata.ShapeError(f"conv_transpose2d: input {tuple(input.shape)} and weight {tuple(weight.shape)} do not "
                                "fit: expected [N, C_in, H, W] and [C_in, C_out / groups, kH, kW]")
    n, c, h, w = x.shape
    if s != (1, 1):
        x = pad(x.reshape(n, c, h, 1, w, 1), (0, s[1] - 1, 0, 0, 0, s[0] - 1)).reshape(n, c, h * s[0], w * s[1])
        x = x.narrow(2, 0, (h - 1) * s[0] + 1).narrow(3, 0, (w - 1) * s[1] + 1)
    k = weight.shape[2:]
    edges = [d[i] * (k[i] - 1) - p[i] for i in range(2)]
    x = pad(x, (edges[1], edges[1] + op[1], edges[0], edges[0] + op[0]))
    c_in, c_out_g = weight.shape[0], weight.shape[1]
    flipped = weight.index_select(2, strata.arange(k[0] - 1, -1, -1, device=weight.device))
    flipped = flipped.index_select(3, strata.arange(k[1] - 1, -1, -1, device=weight.device))
    kernel = flipped.reshape(groups, c_in // groups, c_out_g, k[0], k[1]).transpose(1, 2)
    kernel = kernel.reshape(groups * c_out_g, c_in // groups, k[0], k[1])
    y = _C.nn.functional.conv2d(x, kernel, bias, 1, 0, d, groups)
    return y.squeeze(0) if unbatched else y


def _pool_output_size(size, k, s, p, ceil_mode):
    # PyTorch's pooling_output_shape: in ceil mode the last window must start inside the input or its left padding.
    out = (size + 2 * p - k + ((s - 1) if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if _tuple(dilation, 2, "max_pool2d: dilation") != (1, 1):
        raise NotImplementedError("max_pool2d: dilation other than 1 (torch.nn.functional.max_pool2d's dilation) is "
                                  "not implemented; use dilation=1")
    if return_indices:
        raise NotImplementedError("max_pool2d: return_indices=True (torch.nn.functional.max_pool2d_with_indices) is "
                                  "not implemented; use argmax over unfolded windows, or return_indices=False")
    unbatched = input.dim() == 3
    x = input.unsqueeze(0) if unbatched else input
    k = _tuple(kernel_size, 2, "max_pool2d: kernel_size")
    s = k if stride is None or stride == () else _tuple(stride, 2, "max_pool2d: stride")
    p = _tuple(padding, 2, "max_pool2d: padding")
    if ceil_mode and x.dim() == 4:
        # Ceil mode is floor mode over an input extended on the right and bottom with -inf, which no maximum picks.
        extra = [max(0, (_pool_output_size(x.shape[2 + i], k[i], s[i], p[i], True) - 1) * s[i] + k[i] -
                     (x.shape[2 + i] + 2 * p[i])) for i in range(2)]
        if any(extra):
            x = pad(x, (0, extra[1], 0, extra[0]), value=-math.inf)
    y = _C.nn.functional.max_pool2d(x, k, s, p)
    return y.squeeze(0) if unbatched else y


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    (k,) = _tuple(kernel_size, 1, "max_pool1d: kernel_size")
    (s,) = (k,) if stride is None else _tuple(stride, 1, "max_pool1d: stride")
    (p,) = _tuple(padding, 1, "max_pool1d: padding")
    return max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), dilation, ceil_mode, return_indices).squeeze(-2)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    if max_norm is not None:
        raise NotImplementedError("embedding: max_norm (torch.nn.functional.embedding's renormalisation) is not "
                                  "implemented; renormalise the weight under strata.no_grad() instead")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse gradients are not implemented; use "
                                  "dense gradients (sparse=False, scale_grad_by_freq=False)")
    out = _C.nn.functional.embedding(input, weight)
    if padding_idx is None:
        return out
    if padding_idx < 0:
        padding_idx += weight.shape[0]
    # The padding row's value is looked up as any other, but gives its row no gradient (PyTorch's padding_idx).
    keep = (input != padding_idx).unsqueeze(-1)
    return strata.where(keep, out, out.detach())


def pad(input, pad, mode="constant", value=None):
    """PyTorch's F.pad: `pad` lists (left, right) pairs from the last dim backwards. Constant padding joins blocks
    of `value`; the other modes gather the border positions, so the gradients flow back to them."""
    if len(pad) % 2 or len(pad) // 2 > input.dim():
        raise ValueError(f"pad: padding length must be even and at most twice the input's {input.dim()} dims, "
                         f"got {len(pad)}")
    if mode != "constant" and value not in (None, 0):
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in value argument")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode {mode!r} is not implemented; use 'constant', 'reflect', 'replicate' or "
                                  "'circular'")
    out = input
    for i in range(len(pad) // 2):
        dim, left, right = input.dim() - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1])
        if left == 0 and right == 0:
            continue
        size = out.shape[dim]
        if mode == "constant":
            if left < 0 or right < 0:
                out = out.narrow(dim, max(0, -left), size - max(0, -left) - max(0, -right))
                left, right = max(0, left), max(0, right)
            parts = []
            for n in (left, right):
                shape = list(out.shape)
                shape[dim] = n
                parts.append(strata.full(shape, 0.0 if value is None else value, dtype=out.dtype, device=out.device))
            out = strata.cat([parts[0], out, parts[1]], dim)
            continue
        positions = np.arange(-left, size + right)
        if mode == "replicate":
            positions = np.clip(positions, 0, size - 1)
        elif mode == "circular":
            if left > size or right > size:
                raise ValueError(f"pad: circular padding of {max(left, right)} is larger than the dim's size {size}")
            positions = positions % size
        else:
            if left >= size or right >= size:
                raise ValueError(f"pad: reflect padding ({left}, {right}) must be less than the dim's size {size}")
            period = 2 * (size - 1)
            positions = np.abs(positions) % period
            positions = np.where(positions >= size, period - positions, positions)
        index = strata.tensor(positions.astype(np.int64), device=out.device)
        out = out.index_select(dim, index)
    return out


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """x1 . x2 / (max(|x1|, eps) max(|x2|, eps)) along dim, each side normalised first as PyTorch 2 does."""
    n1 = x1.norm(2, dim, keepdim=True).clamp(min=eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return (x1 - x2 + eps).norm(p, -1, keepdim=keepdim)


def _source_positions(out_size, in_size, scale, align_corners, is_linear):
    """Where each output position reads the input, PyTorch's rule for each mode."""
    out = np.arange(out_size, dtype=np.float64)
    if not is_linear:
        return np.minimum(np.floor(out * scale), in_size - 1).astype(np.int64)
    if align_corners:
        return out * ((in_size - 1) / (out_size - 1) if out_size > 1 else 0.0)
    return np.maximum((out + 0.5) * scale - 0.5, 0.0)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """'nearest' and 'bilinear' (or 'linear' on 3-D input): index_select and weighted sums, so differentiable."""
    if mode not in ("nearest", "bilinear", "linear"):
        raise NotImplementedError(f"interpolate: mode {mode!r} is not implemented; use 'nearest', 'linear' or "
                                  "'bilinear'")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not implemented")
    spatial = input.dim() - 2
    if spatial not in (1, 2):
        raise NotImplementedError(f"interpolate: {input.dim()}-D input is not implemented; use 3-D or 4-D input")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: either size or scale_factor should be defined, not both")
    in_sizes = input.shape[2:]
    if size is not None:
        out_sizes = _tuple(size, spatial, "interpolate: size")
        scales = [i / o for i, o in zip(in_sizes, out_sizes)]
    else:
        factors = (scale_factor,) * spatial if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
        out_sizes = [int(math.floor(i * f)) for i, f in zip(in_sizes, factors)]
        scales = [1.0 / f if not recompute_scale_factor else i / o for f, i, o in zip(factors, in_sizes, out_sizes)]
    is_linear = mode != "nearest"
    out = input
    for k in range(spatial):
        dim = 2 + k
        src = _source_positions(out_sizes[k], in_sizes[k], scales[k], align_corners, is_linear)
        if not is_linear:
            out = out.index_select(dim, strata.tensor(src, device=input.device))
            continue
        low = np.minimum(np.floor(src).astype(np.int64), in_sizes[k] - 1)
        high = np.minimum(low + 1, in_sizes[k] - 1)
        weight_shape = [1] * input.dim()
        weight_shape[dim] = out_sizes[k]
        lam = strata.tensor((src - low).astype(np.float32), device=input.device).to(input.dtype).reshape(weight_shape)
        a = out.index_select(dim, strata.tensor(low, device=input.device))
        b = out.index_select(dim, strata.tensor(high, device=input.device))
        out = a * (1 - lam) + b * lam
    return out


def _implicit_dim(input):
    # PyTorch's deprecated choice when softmax is given no dim.
    return 0 if input.dim() in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    x = input if dtype is None else input.to(dtype)
    return _C.softmax(x, _implicit_dim(x) if dim is None else dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    x = input if dtype is None else input.to(dtype)
    return _C.log_softmax(x, _implicit_dim(x) if dim is None else dim)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return softmax(-input, dim, dtype=dtype)


def gelu(input, approximate="none"):
    return _C.gelu(input, approximate=approximate)


def one_hot(tensor, num_classes=-1):
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1 if tensor.numel() else 0
    return _C.one_hot(tensor, num_classes)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    if ceil_mode or divisor_override is not None:
        raise NotImplementedError("avg_pool2d: ceil_mode=True and divisor_override (torch.nn.functional.avg_pool2d's) "
                                  "are not implemented; pad the input with F.pad and use ceil_mode=False")
    if not count_include_pad and _tuple(padding, 2, "avg_pool2d: padding") != (0, 0):
        raise NotImplementedError("avg_pool2d: count_include_pad=False with padding is not implemented; divide "
                                  "by avg_pool2d of a ones tensor padded the same way instead")
    return _C.nn.functional.avg_pool2d(input, kernel_size, stride, padding)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Each output cell the maximum of its window [floor(i H / h), ceil((i + 1) H / h)), as PyTorch's."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool2d: return_indices=True is not implemented")
    out_h, out_w = _tuple(output_size, 2, "adaptive_max_pool2d: output_size")
    height, width = input.shape[-2:]
    if height % out_h == 0 and width % out_w == 0:
        return max_pool2d(input, (height // out_h, width // out_w))
    rows = []
    for i in range(out_h):
        h0, h1 = i * height // out_h, -(-(i + 1) * height // out_h)
        cells = [input.narrow(-2, h0, h1 - h0).narrow(-1, j * width // out_w,
                                                       -(-(j + 1) * width // out_w) - j * width // out_w)
                 .amax((-2, -1), keepdim=True) for j in range(out_w)]
        rows.append(strata.cat(cells, -1))
    return strata.cat(rows, -2)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels ([N, C, ...] or unbatched [C, ...]) with probability p, scaling the rest by 1 / (1 - p)."""
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    channels = 2 if input.dim() > 3 or input.dim() == 2 else 1

    def drop(x):
        keep = (strata.rand(*x.shape[:channels], *([1] * (x.dim() - channels)), device=x.device) >= p).to(x.dtype)
        return x * keep / (1 - p) if p < 1 else x * 0

    return _apply(drop, input, inplace)


dropout1d = dropout3d = dropout2d


def softsign(input):
    return input / (input.abs() + 1)


def logsigmoid(input):
    return -softplus(-input)


def hardsigmoid(input, inplace=False):
    return _apply(lambda x: relu6(x + 3) / 6, input, inplace)


def hardswish(input, inplace=False):
    return _apply(lambda x: x * relu6(x + 3) / 6, input, inplace)


def tanhshrink(input):
    return input - _C.tanh(input)


def threshold(input, threshold, value, inplace=False):
    return _apply(lambda x: strata.where(x > threshold, x, strata.full_like(x, value)), input, inplace)


def glu(input, dim=-1):
    a, b = input.chunk(2, dim)
    return a * _C.sigmoid(b)


def selu(input, inplace=False):
    return _apply(lambda x: elu(x, 1.6732632423543772) * 1.0507009873554805, input, inplace)


def celu(input, alpha=1.0, inplace=False):
    return _apply(lambda x: strata.where(x > 0, x, (strata.exp(strata.where(x > 0, strata.zeros_like(x), x) / alpha)
                                                    - 1) * alpha), input, inplace)


def softshrink(input, lambd=0.5):
    return strata.where(input > lambd, input - lambd, strata.where(input < -lambd, input + lambd,
                                                                   strata.zeros_like(input)))


def hardshrink(input, lambd=0.5):
    return strata.where(input.abs() > lambd, input, strata.zeros_like(input))
