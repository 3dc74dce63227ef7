"""strata.nn: Module (subclass it in Python), Parameter, and the layers, which run Strata's C++ layers."""
from strata.nn.module import Module, ModuleList, Parameter, Sequential  # noqa: F401
from strata.nn.layers import (  # noqa: F401
    GELU,
    AdaptiveAvgPool2d,
    AvgPool2d,
    BatchNorm2d,
    Conv2d,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    Linear,
    LogSoftmax,
    MaxPool2d,
    MSELoss,
    NLLLoss,
    ReLU,
    Sigmoid,
    Softmax,
    Tanh,
)
from strata.nn import functional, utils  # noqa: F401

Dense = Linear
