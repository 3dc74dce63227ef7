"""Learning-rate schedulers, stepped once per epoch after the optimizer's steps, as in PyTorch. StepLR and
CosineAnnealingLR are C++ (strata-train uses them); the others are written here against optimizer.param_groups,
which every optimizer has, with PyTorch's formulas."""
import bisect
import math

from strata._C.optim.lr_scheduler import CosineAnnealingLR, LRScheduler, StepLR  # noqa: F401


def _check_optimizer(optimizer, scheduler):
    if not hasattr(optimizer, "param_groups"):
        raise TypeError(f"{scheduler}: {type(optimizer).__name__} is not an Optimizer")


class _PythonScheduler:
    """PyTorch's LRScheduler protocol: base_lrs, last_epoch (0 after construction), step(), get_last_lr(),
    state_dict() and load_state_dict()."""

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer, type(self).__name__)
        if last_epoch != -1:
            raise NotImplementedError(f"{type(self).__name__}: last_epoch other than -1 is not implemented; construct "
                                      "the scheduler fresh and load_state_dict() a saved one instead")
        self.optimizer = optimizer
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.last_epoch = 0
        self._last_lr = list(self.base_lrs)

    def get_lr(self):
        raise NotImplementedError

    def step(self, epoch=None):
        if epoch is not None:
            raise NotImplementedError(f"{type(self).__name__}.step(epoch) is deprecated in PyTorch and not "
                                      "implemented; call step() once per epoch")
        self.last_epoch += 1
        lrs = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = list(lrs)

    def get_last_lr(self):
        return self._last_lr

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class ExponentialLR(_PythonScheduler):
    """lr *= gamma every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]


class LambdaLR(_PythonScheduler):
    """lr = base_lr * lr_lambda(epoch); one function, or one per parameter group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer(optimizer, type(self).__name__)
        groups = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != groups:
                raise ValueError(f"Expected {groups} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * groups
        super().__init__(optimizer, last_epoch)
        self._last_lr = self.get_lr()
        for group, lr in zip(optimizer.param_groups, self._last_lr):
            group["lr"] = lr

    def get_lr(self):
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self):
        state = super().state_dict()
        state.pop("lr_lambdas", None)  # functions are not saved, as in PyTorch
        return state


class MultiplicativeLR(LambdaLR):
    """lr *= lr_lambda(epoch) every epoch after the first."""

    def get_lr(self):
        if self.last_epoch == 0:
            return list(self.base_lrs)
        return [group["lr"] * f(self.last_epoch) for group, f in zip(self.optimizer.param_groups, self.lr_lambdas)]


class MultiStepLR(_PythonScheduler):
    """lr = base_lr * gamma^(number of milestones reached)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * self.gamma ** bisect.bisect_right(self.milestones, self.last_epoch) for base in self.base_lrs]


class ReduceLROnPlateau:
    """Multiplies the learning rates by `factor` when a metric has not improved for `patience` epochs:
    step(metric) once per epoch (PyTorch's rules for mode, threshold_mode, cooldown, min_lr and eps)."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        _check_optimizer(optimizer, "ReduceLROnPlateau")
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        groups = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != groups:
                raise ValueError(f"expected {groups} min_lrs, got {len(min_lr)}")
            self.min_lrs = list(min_lr)
        else:
            self.min_lrs = [min_lr] * groups
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown, self.eps = threshold, threshold_mode, cooldown, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def is_better(self, a, best):
        if self.mode == "min":
            return a < best * (1 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1) if self.threshold_mode == "rel" else a > best + self.threshold

    def step(self, metrics):
        current = float(metrics)
        self.last_epoch += 1
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(group["lr"])
                new = max(old * self.factor, min_lr)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self):
        return self._last_lr

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
