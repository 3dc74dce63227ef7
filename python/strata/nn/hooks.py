"""Forward hooks (torch.nn.Module.register_forward_pre_hook / register_forward_hook) and the call that runs them.

A module keeps its hooks in two dicts by handle id, made at the first registration, so that a module without hooks
calls forward() with nothing else on the way.
"""
import itertools

_next_id = itertools.count()


class RemovableHandle:
    """What a register_*_hook returns: remove() unregisters the hook; also a context manager that removes it."""

    def __init__(self, hooks):
        self.hooks_dict_ref, self.id = hooks, next(_next_id)

    def remove(self):
        self.hooks_dict_ref.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def _hooks(module, name):
    hooks = module.__dict__.get(name)
    if hooks is None:
        hooks = {}
        object.__setattr__(module, name, hooks)
    return hooks


def _register(module, name, hook, prepend, with_kwargs):
    if not callable(hook):
        raise TypeError(f"{type(module).__name__}.{name[1:-1]}: the hook must be callable, got "
                        f"{type(hook).__name__}")
    hooks = _hooks(module, name)
    handle = RemovableHandle(hooks)
    entry = (hook, with_kwargs)
    if prepend:
        items = list(hooks.items())
        hooks.clear()
        hooks[handle.id] = entry
        hooks.update(items)
    else:
        hooks[handle.id] = entry
    return handle


def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
    """hook(module, args) runs before forward; a value it returns (a tuple, or one argument) replaces args. With
    with_kwargs, hook(module, args, kwargs) may return (args, kwargs)."""
    return _register(self, "_forward_pre_hooks", hook, prepend, with_kwargs)


def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
    """hook(module, args, output) runs after forward; a value it returns replaces the output. With with_kwargs,
    hook(module, args, kwargs, output)."""
    if always_call:
        raise NotImplementedError("register_forward_hook: always_call=True (running the hook when forward raises) is "
                                  "not implemented; catch the exception around the call instead")
    return _register(self, "_forward_hooks", hook, prepend, with_kwargs)


def call(module, args, kwargs):
    """Module.__call__: the pre-hooks, forward, then the forward hooks, in registration order."""
    pre, post = module.__dict__.get("_forward_pre_hooks"), module.__dict__.get("_forward_hooks")
    if not pre and not post:
        return module.forward(*args, **kwargs)
    for hook, with_kwargs in list((pre or {}).values()):
        if with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError("forward pre-hook registered with_kwargs must return None or a tuple of "
                                       f"(new_args, new_kwargs), got {result!r}")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    output = module.forward(*args, **kwargs)
    for hook, with_kwargs in list((post or {}).values()):
        result = hook(module, args, kwargs, output) if with_kwargs else hook(module, args, output)
        if result is not None:
            output = result
    return output
