"""The activation, channel-dropout and adaptive max-pooling modules of torch.nn that are one call of
strata.nn.functional each."""
from strata.nn import functional as F
from strata.nn.module import Module


def _module(name, function, *options, doc=None):
    """A Module class whose forward is function(x, *its options), the options taken as PyTorch names them."""
    names = [o[0] for o in options]
    defaults = dict(options)

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        values = dict(defaults)
        if len(args) > len(names):
            raise TypeError(f"{name}() takes at most {len(names)} arguments ({len(args)} given)")
        values.update(zip(names, args))
        unknown = set(kwargs) - set(names)
        if unknown:
            raise TypeError(f"{name}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        values.update(kwargs)
        for key, value in values.items():
            setattr(self, key, value)

    def forward(self, x):
        return function(x, *(getattr(self, n) for n in names))

    def extra_repr(self):
        return ", ".join(f"{n}={getattr(self, n)}" for n in names)

    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                  "__doc__": doc or f"torch.nn.{name}: strata.nn.functional.{function.__name__}."})


Hardtanh = _module("Hardtanh", F.hardtanh, ("min_val", -1.0), ("max_val", 1.0), ("inplace", False))
Softsign = _module("Softsign", F.softsign)
LogSigmoid = _module("LogSigmoid", F.logsigmoid)
Mish = _module("Mish", F.mish, ("inplace", False))
Hardswish = _module("Hardswish", F.hardswish, ("inplace", False))
Hardsigmoid = _module("Hardsigmoid", F.hardsigmoid, ("inplace", False))
Softmin = _module("Softmin", F.softmin, ("dim", None))
Tanhshrink = _module("Tanhshrink", F.tanhshrink)
Threshold = _module("Threshold", F.threshold, ("threshold", 0.0), ("value", 0.0), ("inplace", False))
GLU = _module("GLU", F.glu, ("dim", -1))
SELU = _module("SELU", F.selu, ("inplace", False))
CELU = _module("CELU", F.celu, ("alpha", 1.0), ("inplace", False))
Softshrink = _module("Softshrink", F.softshrink, ("lambd", 0.5))
Hardshrink = _module("Hardshrink", F.hardshrink, ("lambd", 0.5))
AdaptiveMaxPool2d = _module("AdaptiveMaxPool2d", F.adaptive_max_pool2d, ("output_size", 1),
                            ("return_indices", False))


class Dropout2d(Module):
    """Zeroes whole channels in training (F.dropout2d); Dropout1d and Dropout3d are the same on their shapes."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        return F.dropout2d(x, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout2d):
    pass


class Dropout3d(Dropout2d):
    pass
