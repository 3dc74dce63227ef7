"""strata.nn.functional: the DNN primitives as functions (torch.nn.functional)."""
from strata._C import gelu, log_softmax, one_hot, relu, sigmoid, softmax, tanh  # noqa: F401
from strata._C.nn.functional import (  # noqa: F401
    adaptive_avg_pool2d,
    avg_pool2d,
    batch_norm,
    conv2d,
    cross_entropy,
    dropout,
    embedding,
    layer_norm,
    linear,
    max_pool2d,
    mse_loss,
    nll_loss,
)
