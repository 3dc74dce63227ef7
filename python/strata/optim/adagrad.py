"""torch.optim.Adagrad's update rule (_single_tensor_adagrad)."""
import strata
from strata.optim._python_optimizer import PythonOptimizer, check_hyperparameter


class Adagrad(PythonOptimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 maximize=False, **options):
        for name, value in (("lr_decay", lr_decay), ("weight_decay", weight_decay),
                            ("initial_accumulator_value", initial_accumulator_value), ("epsilon", eps)):
            check_hyperparameter(name, value)
        super().__init__(params, lr, ["sum"], dict(options, lr_decay=lr_decay, weight_decay=weight_decay,
                                                   initial_accumulator_value=initial_accumulator_value, eps=eps,
                                                   maximize=maximize))

    def update(self, index, p, grad, state, step, lr, weight_decay):
        o = self.defaults  # grad is already maximize's and weight decay's (PythonOptimizer._direction)
        if "sum" not in state:
            state["sum"] = strata.full_like(p, o["initial_accumulator_value"])
            self._set_state(index, "sum", state["sum"])
        clr = lr / (1 + (step - 1) * o["lr_decay"])
        total = state["sum"]
        total.copy_(total + grad * grad)
        p.copy_(p + grad * -clr / (total.sqrt() + o["eps"]))
