"""torch.optim.RMSprop's update rule (_single_tensor_rmsprop)."""
import strata
from strata.optim._python_optimizer import PythonOptimizer, check_hyperparameter


class RMSprop(PythonOptimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 maximize=False, **options):
        for name, value in (("epsilon", eps), ("momentum", momentum), ("weight_decay", weight_decay),
                            ("alpha", alpha)):
            check_hyperparameter(name, value)
        names = ["square_avg"] + (["momentum_buffer"] if momentum > 0 else []) + (["grad_avg"] if centered else [])
        self._state_names = names
        super().__init__(params, lr, names, dict(options, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                                 momentum=momentum, centered=centered, maximize=maximize))

    def update(self, index, p, grad, state, step, lr, weight_decay):
        o = self.defaults  # grad is already maximize's and weight decay's (PythonOptimizer._direction)
        if "square_avg" not in state:
            for name in self._state_names:
                state[name] = strata.zeros_like(p)
                self._set_state(index, name, state[name])
        square_avg = state["square_avg"]
        square_avg.copy_(square_avg * o["alpha"] + grad * (1 - o["alpha"]) * grad)
        if o["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.copy_(grad_avg + (grad - grad_avg) * (1 - o["alpha"]))
            avg = (square_avg - grad_avg * grad_avg).sqrt() + o["eps"]
        else:
            avg = square_avg.sqrt() + o["eps"]
        if o["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf.copy_(buf * o["momentum"] + grad / avg)
            p.copy_(strata.add(p, buf, alpha=-lr))
        else:
            p.copy_(p + grad * -lr / avg)
