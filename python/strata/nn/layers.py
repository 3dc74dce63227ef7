"""The layers. Those with parameters or a training mode run Strata's C++ layer (strata/nn/layers.h), whose
tensors are this module's parameters and buffers, the same handles; the rest are a line of Python each."""
import strata
from strata import _C
from strata.nn import functional as F
from strata.nn.module import Module, Parameter


class _CppLayer(Module):
    """A Module that runs a C++ layer. Its parameters are the C++ layer's own tensors, so moving them (to()), the
    optimizer's updates and the gradients are seen on both sides."""

    _copied_by_construction = True  # copy.deepcopy makes a new C++ layer (Module.__deepcopy__)

    def __init__(self, cpp, **config):
        super().__init__()
        object.__setattr__(self, "_cpp", cpp)
        object.__setattr__(self, "_config", config)
        for name, t in cpp.named_parameters(False):
            self._parameters[name] = Parameter._of(t)
        for name, t in cpp.named_buffers(False):
            self._buffers[name] = t

    def forward(self, x):
        return self._cpp(x)

    def train(self, mode=True):
        super().train(mode)
        self._cpp.train(mode)
        return self

    def extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in self._config.items())


class Linear(_CppLayer):
    """y = x W^T + b, with PyTorch's initialisation."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__(_C.nn.Linear(in_features, out_features, bias, dtype, device), in_features=in_features,
                         out_features=out_features, bias=bias)
        if not bias:
            self._parameters["bias"] = None


class _PaddedConvolution:
    """The C++ convolution of a padding="same" Conv2d whose kernel needs one more row or column of padding at the
    bottom or right than at the top or left (PyTorch's rule for even kernels), which the C++ layer cannot pad: every
    call pads first (so a fused Sequential runs such a Conv2d itself, unfused). Anything else reaches the C++ layer
    itself."""

    def __init__(self, cpp, extra):
        self._inner, self._extra = cpp, extra

    def _pad(self, x):
        return F.pad(x, (0, self._extra[1], 0, self._extra[0]))

    def __call__(self, x):
        return self._inner(self._pad(x))

    def __getattr__(self, name):
        return getattr(self._inner, name)


class Conv2d(_CppLayer):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv2d: padding_mode={padding_mode!r} is not implemented; use "
                                      "padding_mode='zeros', or pad the input with strata.nn.functional.pad first")
        kernel = F._tuple(kernel_size, 2, "Conv2d: kernel_size")
        symmetric, extra = F._conv_padding(padding, kernel, F._tuple(dilation, 2, "Conv2d: dilation"),
                                           F._tuple(stride, 2, "Conv2d: stride"), 2, "Conv2d")
        cpp = _C.nn.Conv2d(in_channels, out_channels, kernel_size, stride, symmetric, dilation, groups, bias, dtype,
                           device)
        super().__init__(cpp, in_channels=in_channels, out_channels=out_channels, kernel_size=kernel_size,
                         stride=stride, padding=padding)
        if any(extra):
            object.__setattr__(self, "_cpp", _PaddedConvolution(cpp, extra))
        if not bias:
            self._parameters["bias"] = None


class MaxPool2d(Module):
    """The C++ max pooling through F.max_pool2d, which adds ceil_mode."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, kernel_size if stride is None else stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode
        F.max_pool2d(strata.zeros(1, 1, 1, 1), 1, dilation=dilation, return_indices=return_indices)  # refuse early

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(_CppLayer):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        # The options the C++ pooling lacks are refused here, as F.avg_pool2d refuses them.
        F.avg_pool2d(strata.zeros(1, 1, 1, 1), 1, None, 0, ceil_mode, count_include_pad or padding == 0,
                     divisor_override)
        if not count_include_pad and F._tuple(padding, 2, "AvgPool2d: padding") != (0, 0):
            F.avg_pool2d(strata.zeros(1, 1, 3, 3), 3, None, padding, False, False)
        super().__init__(_C.nn.AvgPool2d(kernel_size, stride, padding), kernel_size=kernel_size, stride=stride,
                         padding=padding)


class AdaptiveAvgPool2d(_CppLayer):
    def __init__(self, output_size):
        super().__init__(_C.nn.AdaptiveAvgPool2d(output_size), output_size=output_size)


class BatchNorm2d(_CppLayer):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        super().__init__(_C.nn.BatchNorm2d(num_features, eps, momentum, affine, track_running_stats, dtype, device),
                         num_features=num_features, eps=eps, momentum=momentum, affine=affine)


class BatchNorm1d(BatchNorm2d):
    """BatchNorm2d's C++ layer over [N, C] or [N, C, L] seen as [N, C, L, 1]: the same statistics per channel."""

    def forward(self, x):
        if x.dim() not in (2, 3):
            raise ValueError(f"BatchNorm1d: expected 2D or 3D input (got {x.dim()}D input)")
        return self._cpp(x.reshape(tuple(x.shape) + (1,) * (4 - x.dim()))).reshape(tuple(x.shape))


class LayerNorm(_CppLayer):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, device=None, dtype=None):
        super().__init__(_C.nn.LayerNorm(normalized_shape, eps, elementwise_affine, dtype, device),
                         normalized_shape=normalized_shape, eps=eps, elementwise_affine=elementwise_affine)


class Dropout(_CppLayer):
    def __init__(self, p=0.5, inplace=False):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        super().__init__(_C.nn.Dropout(p), p=p, inplace=inplace)
        self.p, self.inplace = p, inplace

    def forward(self, x):
        # p and training as they are now, as PyTorch reads them: a p set after construction, or training set
        # directly, counts (the C++ layer only mirrors train()).
        return F.dropout(x, self.p, self.training, self.inplace)


class Embedding(_CppLayer):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx must be within num_embeddings ({num_embeddings}), "
                                 f"got {padding_idx}")
            padding_idx = padding_idx % num_embeddings
        super().__init__(_C.nn.Embedding(num_embeddings, embedding_dim, dtype, device),
                         num_embeddings=num_embeddings, embedding_dim=embedding_dim, padding_idx=padding_idx)
        self.padding_idx, self.max_norm, self.sparse = padding_idx, max_norm, sparse
        self.scale_grad_by_freq = scale_grad_by_freq
        F.embedding(strata.zeros(1, dtype=strata.int64), self.weight[:1], None, max_norm, norm_type,
                    scale_grad_by_freq, sparse)  # refuse what is not implemented now, not at the first call
        with strata.no_grad():
            if _weight is not None:
                if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                    raise strata.ShapeError(f"Embedding: _weight has shape {tuple(_weight.shape)}, expected "
                                            f"{(num_embeddings, embedding_dim)}")
                self.weight.copy_(_weight)
            elif padding_idx is not None:
                self.weight[padding_idx].fill_(0)
        self.weight.requires_grad_(not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, **kwargs):
        if embeddings.dim() != 2:
            raise ValueError("Embedding.from_pretrained: embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, _weight=embeddings, _freeze=freeze, device=embeddings.device,
                   dtype=embeddings.dtype, **kwargs)

    def forward(self, x):
        return F.embedding(x, self.weight, self.padding_idx)


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x):
        return F.relu(x, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class SiLU(ReLU):
    def forward(self, x):
        return F.silu(x, self.inplace)


class ELU(ReLU):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, self.alpha, self.inplace)


class ReLU6(ReLU):
    def forward(self, x):
        return F.relu6(x, self.inplace)


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)


class Tanh(Module):
    def forward(self, x):
        return strata.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return strata.sigmoid(x)


class Identity(Module):
    """Returns its input; takes and ignores any arguments, as PyTorch's."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim)


class LogSoftmax(Softmax):
    def forward(self, x):
        return F.log_softmax(x, self.dim)


class Unflatten(Module):
    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        d = self.dim % x.dim()
        return x.reshape(*(tuple(x.shape[:d]) + self.unflattened_size + tuple(x.shape[d + 1:])))


class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None):
        super().__init__()
        self.size, self.scale_factor, self.mode, self.align_corners = size, scale_factor, mode, align_corners

    def forward(self, x):
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners)


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PReLU(Module):
    """max(0, x) + weight * min(0, x), with one learned slope (or one per channel), 0.25 at first."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = Parameter(strata.full((num_parameters,), init, dtype=dtype or strata.float32, device=device))

    def forward(self, x):
        shape = [1] * x.dim()
        if x.dim() >= 2:
            shape[1] = self.num_parameters
        slope = self.weight.reshape(shape) if self.num_parameters > 1 else self.weight.reshape([1] * max(x.dim(), 1))
        return strata.where(x > 0, x, x * slope)


# The C++ layers that stand for Python's ReLU and MaxPool2d in fused runs: they hold no state, so one serves every run
# (one pooling per kernel, stride and padding).
_relu_layer = None
_pool_layers = {}


def _cpp_layer_of(module, first_of_run):
    """The C++ layer that computes `module` inside a fused Sequential's run of C++ layers (Sequential.fuse), or None
    when Python must call it: a module with hooks, a subclass (which may override forward, as C++ matches exact
    types), a padded Conv2d, options the C++ pooling lacks. A ReLU opens no run: alone it fuses with nothing, and
    an in-place one would then write the run's input."""
    if module.__dict__.get("_forward_pre_hooks") or module.__dict__.get("_forward_hooks"):
        return None
    kind = type(module)
    if kind is ReLU:
        global _relu_layer
        if first_of_run:
            return None
        if _relu_layer is None:
            _relu_layer = _C.nn.ReLU()
        return _relu_layer
    if kind is MaxPool2d:
        if module.ceil_mode or module.return_indices or F._tuple(module.dilation, 2, "MaxPool2d: dilation") != (1, 1):
            return None
        key = tuple(F._tuple(v, 2, "MaxPool2d: " + name) for v, name in
                    ((module.kernel_size, "kernel_size"), (module.stride, "stride"), (module.padding, "padding")))
        pool = _pool_layers.get(key)
        if pool is None:  # kept apart from the module, which copy.deepcopy and pickle then see as it was
            pool = _pool_layers.setdefault(key, _C.nn.MaxPool2d(*key))
        return pool
    if kind in _PLAIN_CPP_LAYERS and isinstance(module._cpp, _C.nn.CppLayer):  # a padded Conv2d's is not
        return module._cpp
    return None


# The layers whose forward is their C++ layer's call, matched by exact type.
_PLAIN_CPP_LAYERS = (Linear, Conv2d, AvgPool2d, AdaptiveAvgPool2d, BatchNorm2d, LayerNorm)
