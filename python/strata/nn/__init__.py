"""strata.nn: Module (subclass it in Python), Parameter, and the layers, which run Strata's C++ layers."""
from strata.nn.module import Module, ModuleList, Parameter, Sequential  # noqa: F401
from strata.nn.layers import (  # noqa: F401
    ELU,
    GELU,
    AdaptiveAvgPool2d,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv2d,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSoftmax,
    MaxPool2d,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
    CosineSimilarity,
    PReLU,
    Unflatten,
    Upsample,
)
from strata.nn.activation import (  # noqa: F401
    CELU,
    GLU,
    SELU,
    AdaptiveMaxPool2d,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LogSigmoid,
    Mish,
    Softmin,
    Softshrink,
    Softsign,
    Tanhshrink,
    Threshold,
)
from strata.nn.conv import Conv1d, ConvTranspose2d, MaxPool1d  # noqa: F401
from strata.nn.loss import (  # noqa: F401
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from strata.nn.containers import ModuleDict, ParameterDict, ParameterList  # noqa: F401
from strata.nn.normalization import GroupNorm  # noqa: F401
from strata.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: F401
from strata.nn.transformer import (  # noqa: F401
    MultiheadAttention,
    Transformer,
    TransformerEncoder,
    TransformerEncoderLayer,
    scaled_dot_product_attention,
)
from strata.nn import functional, hooks, init, utils  # noqa: F401

functional.scaled_dot_product_attention = scaled_dot_product_attention  # transformer.py imports functional

Dense = Linear
from strata.nn import parallel  # noqa: E402,F401 (DistributedDataParallel)
