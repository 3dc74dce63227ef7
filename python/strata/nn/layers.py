"""The layers. Those with parameters or a training mode run Strata's C++ layer (strata/nn/layers.h), whose
tensors are this module's parameters and buffers, the same handles; the rest are a line of Python each."""
import strata
from strata import _C
from strata.nn import functional as F
from strata.nn.module import Module, Parameter


class _CppLayer(Module):
    """A Module that runs a C++ layer. Its parameters are the C++ layer's own tensors, so moving them (to()), the
    optimizer's updates and the gradients are seen on both sides."""

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


class Conv2d(_CppLayer):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 device=None, dtype=None):
        cpp = _C.nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, dtype,
                           device)
        super().__init__(cpp, in_channels=in_channels, out_channels=out_channels, kernel_size=kernel_size,
                         stride=stride, padding=padding)
        if not bias:
            self._parameters["bias"] = None


class MaxPool2d(_CppLayer):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__(_C.nn.MaxPool2d(kernel_size, stride, padding), kernel_size=kernel_size, stride=stride,
                         padding=padding)


class AvgPool2d(_CppLayer):
    def __init__(self, kernel_size, stride=None, padding=0):
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


class LayerNorm(_CppLayer):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, device=None, dtype=None):
        super().__init__(_C.nn.LayerNorm(normalized_shape, eps, elementwise_affine, dtype, device),
                         normalized_shape=normalized_shape, eps=eps, elementwise_affine=elementwise_affine)


class Dropout(_CppLayer):
    def __init__(self, p=0.5):
        super().__init__(_C.nn.Dropout(p), p=p)


class Embedding(_CppLayer):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__(_C.nn.Embedding(num_embeddings, embedding_dim, dtype, device),
                         num_embeddings=num_embeddings, embedding_dim=embedding_dim)


class ReLU(Module):
    def forward(self, x):
        return strata.relu(x)


class GELU(Module):
    def forward(self, x):
        return strata.gelu(x)


class Tanh(Module):
    def forward(self, x):
        return strata.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return strata.sigmoid(x)


class Identity(Module):
    def forward(self, x):
        return x


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)


class Softmax(Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return strata.softmax(x, self.dim)


class LogSoftmax(Softmax):
    def forward(self, x):
        return strata.log_softmax(x, self.dim)


class CrossEntropyLoss(Module):
    def __init__(self, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__()
        self.ignore_index, self.reduction, self.label_smoothing = ignore_index, reduction, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, reduction=self.reduction, label_smoothing=self.label_smoothing,
                               ignore_index=self.ignore_index)


class NLLLoss(Module):
    def __init__(self, ignore_index=-100, reduction="mean"):
        super().__init__()
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, input, target):
        return F.nll_loss(input, target, reduction=self.reduction, ignore_index=self.ignore_index)


class MSELoss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)
