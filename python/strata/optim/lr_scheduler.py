"""Learning-rate schedulers, stepped once per epoch after the optimizer's steps, as in PyTorch. StepLR and
CosineAnnealingLR are C++ (strata-train uses them); the others are written here against optimizer.param_groups,
which every optimizer has, with PyTorch's formulas."""
import bisect
import math

import strata

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
        self._apply(self.get_lr())

    def _apply(self, lrs):
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
        if self.last_epoch == 0:  # constructed, or restarted by SequentialLR
            return list(self.base_lrs)
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
        self._apply(self.get_lr())

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


class LinearLR(_PythonScheduler):
    """lr = base_lr * factor, the factor going linearly from start_factor to end_factor over total_iters epochs."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1, "
                             "ending factor between 0 and 1")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)
        self._apply(self.get_lr())

    def get_lr(self):
        progress = min(self.last_epoch, self.total_iters) / self.total_iters
        factor = self.start_factor + (self.end_factor - self.start_factor) * progress
        return [base * factor for base in self.base_lrs]


class ConstantLR(_PythonScheduler):
    """lr = base_lr * factor for the first total_iters epochs, then base_lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if not 0 <= factor <= 1:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)
        self._apply(self.get_lr())

    def get_lr(self):
        return [base * (self.factor if self.last_epoch < self.total_iters else 1.0) for base in self.base_lrs]


class PolynomialLR(_PythonScheduler):
    """lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ^ power."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        decay = (1.0 - min(self.last_epoch, self.total_iters) / self.total_iters) ** self.power
        return [base * decay for base in self.base_lrs]


class CosineAnnealingWarmRestarts(_PythonScheduler):
    """Cosine annealing from base_lr to eta_min over T_0 epochs, restarting, each period T_mult times longer."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        self.T_0, self.T_mult, self.eta_min = T_0, T_mult, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        epoch = self.last_epoch
        if self.T_mult == 1:
            t_cur, t_i = epoch % self.T_0, self.T_0
        else:
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            t_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
            t_i = self.T_0 * self.T_mult ** n
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2
                for base in self.base_lrs]


class OneCycleLR(_PythonScheduler):
    """The 1cycle policy, stepped after every batch: up from max_lr / div_factor to max_lr over pct_start of the
    steps, then down to that / final_div_factor (a third phase back first with three_phase)."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if cycle_momentum:
            raise NotImplementedError("OneCycleLR: cycle_momentum=True (cycling SGD's momentum or Adam's beta1) is "
                                      "not implemented, as Strata's optimizers fix them at construction; pass "
                                      "cycle_momentum=False")
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0 or not 0 <= pct_start <= 1 or anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: expected total_steps > 0, pct_start in [0, 1] and anneal_strategy 'cos' or "
                             f"'linear', got {total_steps}, {pct_start}, {anneal_strategy!r}")
        self.total_steps, self.anneal_strategy = total_steps, anneal_strategy
        groups = len(optimizer.param_groups)
        max_lrs = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * groups
        if len(max_lrs) != groups:
            raise ValueError(f"max_lr must have the same length as optimizer.param_groups. max_lr has {len(max_lrs)} "
                             f"values, param_groups has {groups}.")
        self.max_lrs = max_lrs
        self.initial_lrs = [m / div_factor for m in max_lrs]
        self.min_lrs = [i / final_div_factor for i in self.initial_lrs]
        up = float(pct_start * total_steps) - 1
        if three_phase:
            self.phases = [(up, "initial", "max"), (float(2 * pct_start * total_steps) - 2, "max", "initial"),
                           (total_steps - 1, "initial", "min")]
        else:
            self.phases = [(up, "initial", "max"), (total_steps - 1, "max", "min")]
        for group, lr in zip(optimizer.param_groups, self.initial_lrs):
            group["lr"] = lr
        super().__init__(optimizer, last_epoch)
        self.base_lrs = list(self.initial_lrs)

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "linear":
            return (end - start) * pct + start
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps is {self.total_steps}")
        lrs = []
        for g in range(len(self.initial_lrs)):
            values = {"initial": self.initial_lrs[g], "max": self.max_lrs[g], "min": self.min_lrs[g]}
            start_step = 0.0
            for i, (end_step, start, end) in enumerate(self.phases):
                if step <= end_step or i == len(self.phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(values[start], values[end], pct))
                    break
                start_step = end_step
        return lrs


class SequentialLR:
    """Runs schedulers one after another, switching at the milestones (epochs); each starts from the learning
    rates the optimizer had before any of them, as PyTorch's."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_optimizer(optimizer, "SequentialLR")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got {len(schedulers)} and {len(milestones)}")
        self.optimizer, self._schedulers, self._milestones = optimizer, list(schedulers), list(milestones)
        self.initial_lrs = list(schedulers[0].base_lrs)
        self.last_epoch = 0
        self._restart(self._schedulers[0])

    def _restart(self, scheduler):
        """The scheduler at its epoch 0, from the initial learning rates."""
        if isinstance(scheduler, LRScheduler):
            state = {"last_epoch": 0, "base_lr": self.initial_lrs[0]}
            state.update({f"base_lr.{g}": lr for g, lr in enumerate(self.initial_lrs) if g})
            scheduler.load_state_dict({k: strata.scalar_tensor(v, dtype=strata.int64 if k == "last_epoch" else
                                                               strata.float64) for k, v in state.items()})
        else:
            scheduler.base_lrs, scheduler.last_epoch = list(self.initial_lrs), 0
            scheduler._apply(scheduler.get_lr())

    def step(self):
        self.last_epoch += 1
        index = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            self._restart(scheduler)
        else:
            scheduler.step()

    def get_last_lr(self):
        return [group["lr"] for group in self.optimizer.param_groups]
