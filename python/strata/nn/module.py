"""Module, Parameter and the containers, in Python so that models are written as in PyTorch."""
import copy
from collections import namedtuple

import strata
from strata import _C
from strata.nn import hooks

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Parameter(_C.Tensor):
    """A tensor that a Module registers as a parameter when assigned to one of its attributes."""

    def __init__(self, data=None, requires_grad=True):
        # A new leaf on the same memory, as PyTorch's Parameter.
        data = strata.empty(0) if data is None else data
        super().__init__(data.detach())
        self.requires_grad_(requires_grad)
        _C._adopt(self)  # Note [One Python object per tensor]

    @classmethod
    def _of(cls, t):
        """The very tensor `t` (same handle, same gradient) seen as a Parameter: how C++ layers' weights appear."""
        p = cls.__new__(cls)
        _C.Tensor.__init__(p, t)
        _C._adopt(p)
        return p

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Base of every model. Assigning a Parameter, a Module or (register_buffer) a tensor to an attribute registers
    it; parameters(), state_dict(), to() and train() then recurse through the tree."""

    # A module whose state lives in a C++ layer (strata.nn.layers) is copied by constructing it again with the same
    # arguments, which __new__ keeps for it; others are copied attribute by attribute.
    _copied_by_construction = False

    def __new__(cls, *args, **kwargs):
        module = super().__new__(cls)
        if cls._copied_by_construction:
            object.__setattr__(module, "_init_args", (args, kwargs))
        return module

    def __deepcopy__(self, memo):
        state = self.__dict__
        if "_cpp" not in state:
            new = type(self).__new__(type(self))
            memo[id(self)] = new
            for name, value in state.items():
                object.__setattr__(new, name, copy.deepcopy(value, memo))
            return new
        args, kwargs = state["_init_args"]
        new = type(self)(*copy.deepcopy(args, memo), **copy.deepcopy(kwargs, memo))
        memo[id(self)] = new
        for name, p in self._parameters.items():
            if p is not None:
                setattr(new, name, copy.deepcopy(p, memo))  # reaches the new C++ layer (replace_parameter)
        with strata.no_grad():
            for name, b in self._buffers.items():
                if b is not None:
                    new._buffers[name].copy_(b)
        for name, value in state.items():
            if name not in ("_cpp", "_parameters", "_buffers", "_init_args"):
                object.__setattr__(new, name, copy.deepcopy(value, memo))
        new._cpp.train(self.training)
        return new

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})

    # --- registration by attribute ---
    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        # A layer that runs in C++ (strata.nn.layers) reads its own handles: what is assigned here must reach them,
        # or its forward would go on using the old tensor (weight tying) or the old mode.
        cpp = self.__dict__.get("_cpp")
        if isinstance(value, Parameter) or isinstance(value, Module):
            if params is None:
                raise AttributeError(f"cannot assign '{name}' before Module.__init__() is called")
            if cpp is not None and isinstance(value, Parameter) and params.get(name) is not None:
                cpp.replace_parameter(name, value)
            self._forget(name)
            (params if isinstance(value, Parameter) else self._modules)[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(strata.nn.Parameter or None expected)")
            if cpp is not None and params[name] is not None:
                raise NotImplementedError(f"{type(self).__name__}.{name} = None: this layer runs in C++ and cannot "
                                          f"drop its '{name}'; make the layer without it instead")
            params[name] = None
        elif name == "training" and cpp is not None:
            object.__setattr__(self, name, value)
            cpp.train(bool(value))
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, _C.Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (a tensor or None)")
            self._buffers[name] = value
        elif params is not None and name in self._modules and value is None:
            self._modules[name] = None
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        # Only called when ordinary lookup fails: registered things live in the three dicts.
        for store in ("_parameters", "_buffers", "_modules"):
            d = self.__dict__.get(store)
            if d is not None and name in d:
                return d[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if not self._forget(name):
            object.__delattr__(self, name)

    def _forget(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            d = self.__dict__.get(store)
            if d is not None and name in d:
                del d[name]
                return True
        self.__dict__.pop(name, None)
        return False

    def register_parameter(self, name, param):
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: '{name}' must be a strata.nn.Parameter or None")
        self._forget(name)
        self._parameters[name] = param

    def register_buffer(self, name, tensor):
        if tensor is not None and not isinstance(tensor, _C.Tensor):
            raise TypeError(f"register_buffer: '{name}' must be a tensor or None")
        self._forget(name)
        self._buffers[name] = tensor

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: '{name}' must be a strata.nn.Module or None")
        self._forget(name)
        self._modules[name] = module

    register_module = add_module

    # --- calling ---
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        return hooks.call(self, args, kwargs)  # forward, with the hooks registered below

    register_forward_pre_hook = hooks.register_forward_pre_hook
    register_forward_hook = hooks.register_forward_hook

    # --- the tree ---
    def named_children(self):
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix="", _seen=None):
        seen = set() if _seen is None else _seen
        if id(self) in seen:
            return
        seen.add(id(self))
        yield prefix, self
        for name, m in self.named_children():
            yield from m.named_modules(f"{prefix}.{name}" if prefix else name, seen)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def _named(self, store, prefix, recurse):
        # Each tensor once, even when a module is shared by two places.
        seen = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_prefix, m in modules:
            for name, t in getattr(m, store).items():
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{module_prefix}.{name}" if module_prefix else name), t

    def named_parameters(self, prefix="", recurse=True):
        return self._named("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        return self._named("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # --- modes, gradients, devices ---
    def train(self, mode=True):
        object.__setattr__(self, "training", bool(mode))
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def to(self, *args, device=None, dtype=None):
        """Moves (or converts) every parameter, buffer and gradient in place: the tensors keep their identity, so an
        optimizer made before still holds them. Only floating tensors change dtype."""
        for a in args:
            if isinstance(a, strata.dtype):
                dtype = a
            else:
                device = a
        if dtype is not None and not dtype.is_floating_point:
            raise strata.DTypeError(f"{type(self).__name__}.to({dtype}): modules convert to floating dtypes only")
        if device is not None and not isinstance(device, strata.device):
            device = strata.device(str(device))
        _C.nn.to_in_place(list(self.parameters()) + list(self.buffers()), device, dtype)
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    def float(self):
        return self.to(strata.float32)

    def double(self):
        return self.to(strata.float64)

    def half(self):
        return self.to(strata.float16)

    # --- state ---
    def state_dict(self):
        """Each module's parameters then buffers, depth first, by dotted name (tensors sharing the live memory)."""
        out = {}
        for prefix, m in self.named_modules():
            for store in (m._parameters, m._buffers):
                for name, t in store.items():
                    if t is not None:
                        out[f"{prefix}.{name}" if prefix else name] = t.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copies values into the existing tensors (on their devices and dtypes). Every problem is found first and
        reported in one error; nothing changes then."""
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        problems = []
        for k, t in own.items():
            if k in state_dict and tuple(state_dict[k].shape) != tuple(t.shape):
                problems.append(f"'{k}': shape {tuple(state_dict[k].shape)} in the dict, {tuple(t.shape)} in the model")
        if strict and missing:
            problems.append("missing keys: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(unexpected))
        if problems:
            raise strata.InvalidArgumentError(f"{type(self).__name__}.load_state_dict: " + "; ".join(problems))
        with strata.no_grad():
            for k, t in own.items():
                if k in state_dict:
                    t.copy_(state_dict[k].to(t.device))
        return IncompatibleKeys(missing, unexpected)

    # --- printing ---
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = []
        for name, m in self._modules.items():
            body = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}({extra}" if extra else f"{type(self).__name__}("
        return head + "\n" + "\n".join(lines) + "\n)"


class ModuleList(Module):
    """A list of modules whose parameters the owner registers."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        """Appends every module of an iterable, as list.extend."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        """Inserts a module before `index`, renumbering the rest "0", "1", ... as PyTorch does."""
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, index):
        return list(self._modules.values())[index]


class Sequential(ModuleList):
    """Modules applied in order, registered as "0", "1", ... (so parameters read "0.weight"); or from a dict, by
    name."""

    def __init__(self, *modules):
        if len(modules) == 1 and isinstance(modules[0], dict):
            super().__init__()
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            super().__init__(modules)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(*list(self._modules.values())[index])
        return super().__getitem__(index)

    def fuse(self, on=True):
        """Runs a Conv2d followed by a ReLU as one fused convolution, and a Conv2d, ReLU, MaxPool2d as convolution,
        pooling, ReLU, with fewer passes over memory. Off by default, so that the layers run as written. Each run of
        children that are C++ layers (Conv2d, ReLU, MaxPool2d, Linear, BatchNorm2d, ...; none with hooks) goes to
        C++'s Sequential rule (strata.nn's run_layers, strata/nn/layers.cpp): one implementation, so a fused Python
        network computes the bits strata-train's does. What fusion may change, rounding of some gradients, is in
        Note [Fusing a Sequential's layers] there."""
        object.__setattr__(self, "_fuse", bool(on))
        return self

    @property
    def fused(self):
        return getattr(self, "_fuse", False)

    def forward(self, x):
        if not self.fused:
            for m in self._modules.values():
                x = m(x)
            return x
        from strata.nn.layers import _cpp_layer_of  # layers imports this module

        run = []  # the C++ layers of the run under way
        for m in self._modules.values():
            cpp = _cpp_layer_of(m, first_of_run=not run)
            if cpp is not None:
                run.append(cpp)
                continue
            if run:
                x = _C.nn.run_layers(run, x, True)
                run = []
            x = m(x)
        return _C.nn.run_layers(run, x, True) if run else x
