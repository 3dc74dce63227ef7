"""Conv1d and MaxPool1d: the 2-D C++ kernels over a unit height (strata.nn.functional.conv1d, max_pool1d), with
PyTorch's parameter shapes ([out, in / groups, k]) and initialisation, so that state dicts match PyTorch's."""
import math

import strata
from strata.nn import functional as F
from strata.nn import init
from strata.nn.module import Module, Parameter


class Conv1d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv1d: padding_mode={padding_mode!r} is not implemented; use "
                                      "padding_mode='zeros', or pad the input with strata.nn.functional.pad first")
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv1d: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        (k,) = F._tuple(kernel_size, 1, "Conv1d: kernel_size")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (k,)
        self.stride = F._tuple(stride, 1, "Conv1d: stride")
        self.padding = padding if isinstance(padding, str) else F._tuple(padding, 1, "Conv1d: padding")
        self.dilation, self.groups = F._tuple(dilation, 1, "Conv1d: dilation"), groups
        F._conv_padding(self.padding, self.kernel_size, self.dilation, self.stride, 1, "Conv1d")  # checks "same"
        options = dict(dtype=dtype or strata.float32, device=device)
        self.weight = Parameter(strata.empty(out_channels, in_channels // groups, k, **options))
        self.bias = Parameter(strata.empty(out_channels, **options)) if bias else None
        if not bias:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # PyTorch's _ConvNd: kaiming_uniform_(a=sqrt(5)), which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), for both.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.weight.shape[1] * self.weight.shape[2])
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
                + (f", padding={self.padding}" if self.padding not in ((0,), "valid") else "")
                + (f", groups={self.groups}" if self.groups != 1 else "")
                + (", bias=False" if self.bias is None else ""))


class MaxPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, kernel_size if stride is None else stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, x):
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class ConvTranspose2d(Module):
    """The transposed convolution (F.conv_transpose2d), with PyTorch's weight [in, out / groups, kH, kW] and its
    initialisation."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f"ConvTranspose2d: only 'zeros' padding mode is supported, got {padding_mode!r}")
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"ConvTranspose2d: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = F._tuple(kernel_size, 2, "ConvTranspose2d: kernel_size")
        self.stride, self.padding = F._tuple(stride, 2, "stride"), F._tuple(padding, 2, "padding")
        self.output_padding, self.dilation = F._tuple(output_padding, 2, "output_padding"), F._tuple(dilation, 2,
                                                                                                      "dilation")
        self.groups = groups
        options = dict(dtype=dtype or strata.float32, device=device)
        self.weight = Parameter(strata.empty(in_channels, out_channels // groups, *self.kernel_size, **options))
        self.bias = Parameter(strata.empty(out_channels, **options)) if bias else None
        if not bias:
            self.register_parameter("bias", None)
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.weight.shape[1] * self.kernel_size[0] * self.kernel_size[1])
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x, output_size=None):
        if output_size is not None:
            raise NotImplementedError("ConvTranspose2d: output_size= is not implemented; set output_padding instead")
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
                + (f", padding={self.padding}" if self.padding != (0, 0) else ""))
