"""Learning-rate schedulers, stepped once per epoch after the optimizer's steps, as in PyTorch."""
from strata._C.optim.lr_scheduler import CosineAnnealingLR, LRScheduler, StepLR  # noqa: F401
