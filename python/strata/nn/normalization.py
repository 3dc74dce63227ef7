"""GroupNorm (torch.nn.GroupNorm), composed: statistics over each group of channels and the spatial dims."""
import strata
from strata.nn import init
from strata.nn.module import Module, Parameter


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    if input.dim() < 2 or input.shape[1] % num_groups:
        raise strata.ShapeError(f"group_norm: expected [N, C, ...] with C divisible by num_groups ({num_groups}), "
                                f"got {tuple(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    grouped = input.reshape(n, num_groups, -1)
    mean = grouped.mean(2, keepdim=True)
    var = grouped.var(2, False, True)
    out = ((grouped - mean) / strata.sqrt(var + eps)).reshape(*input.shape)
    channel_shape = [1, c] + [1] * (input.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(channel_shape)
    if bias is not None:
        out = out + bias.reshape(channel_shape)
    return out


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        options = dict(dtype=dtype or strata.float32, device=device)
        if affine:
            self.weight = Parameter(init.ones_(strata.empty(num_channels, **options)))
            self.bias = Parameter(init.zeros_(strata.empty(num_channels, **options)))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x):
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
