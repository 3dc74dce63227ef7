"""strata.optim: SGD, Adam, AdamW (C++), and their learning-rate schedulers in strata.optim.lr_scheduler."""
from strata._C.optim import SGD, Adam, AdamW, Optimizer  # noqa: F401
from strata.optim import lr_scheduler  # noqa: F401
