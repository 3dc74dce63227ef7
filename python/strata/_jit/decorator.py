"""@strata.jit: the decorator, the per-signature cache and the launches (kernel[blocks, threads](args),
kernel.forall(n)(args))."""

import re
import threading

import numpy as _np

from strata import _C
from strata._jit.translator import FunctionInfo, TranslationError, translate_kernel
from strata._jit.types import ArrayType, parse_type, type_of_argument
from strata.kernels import RawKernel

FORALL_THREADS = 256


def _compile_error(kernel_info, e):
    info = e.info or kernel_info
    if info is None:
        return _C.CompileError(str(e))
    where = f"{info.file}:{e.line}" if e.line else info.file
    text = info.text(e.line) if e.line else ""
    return _C.CompileError(f"{where}: {e}" + (f"\n    {text}" if text else ""))


class Dispatcher:
    """A Python function compiled by strata.jit, per signature. A kernel (device=False) is launched as Numba's:
    `kernel[blocks, threads](*args)`, `kernel[blocks, threads, shared_bytes](*args)` or `kernel.forall(n)(*args)`. A
    device function (device=True) is called from kernels and other device functions; called from Python it runs as
    Python (which is how tests get what to expect).

    A signature is the tuple of the arguments' types as strings: 'f32[:]', 'i64[:, :]' for arrays (tensors or NumPy
    arrays), 'i64', 'f64', 'bool', 'f32', ... for numbers (a Python int is 'i64', a float 'f64'). With the device
    type ('cpu', 'cuda', 'hip') it keys the compiled kernels held in memory; RawKernel's disk cache, keyed by the
    generated source, spares a second process the C++ compile."""

    def __init__(self, fn, device=False, boundscheck=True, cache=True):
        self.py_func = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.device = device
        self.boundscheck = boundscheck
        self.cache = cache
        self._info = None
        self._kernels = {}  # (signature, device type) -> (RawKernel, source)
        self._lock = threading.Lock()

    def function_info(self):
        if self._info is None:
            try:
                self._info = FunctionInfo(self.py_func)
            except TranslationError as e:
                raise _compile_error(None, e) from None
        return self._info

    def __repr__(self):
        return f"<strata.jit {'device function' if self.device else 'kernel'} {self.__name__}>"

    def __call__(self, *args):
        if self.device:
            return self.py_func(*args)  # as plain Python: what the compiled function computes, for tests
        raise TypeError(f"launch the strata.jit kernel '{self.__name__}' as {self.__name__}[blocks, threads](...) "
                        f"or {self.__name__}.forall(n)(...)")

    # ---- launches ----
    def __getitem__(self, config):
        if self.device:
            raise TypeError(f"'{self.__name__}' is a device function; only kernels are launched")
        if not isinstance(config, tuple) or not 2 <= len(config) <= 3:
            raise TypeError(f"{self.__name__}[blocks, threads] or [blocks, threads, shared_bytes]: got {config!r}")
        blocks, threads = config[0], config[1]
        shared = config[2] if len(config) == 3 else 0
        return _Launch(self, blocks, threads, shared)

    def forall(self, ntasks, tpb=0):
        """A launch of at least ntasks threads in 1-D: tpb threads a block (256 when 0), enough blocks. The kernel
        still tests its index against the size, as with any launch."""
        if self.device:
            raise TypeError(f"'{self.__name__}' is a device function; only kernels are launched")
        ntasks, tpb = int(ntasks), int(tpb) or FORALL_THREADS
        return _Launch(self, max(1, -(-ntasks // tpb)), tpb, 0)

    # ---- compilation ----
    def _signature(self, args):
        types, devices = [], []
        for i, a in enumerate(args):
            try:
                t, device = type_of_argument(a)
            except TypeError as e:
                raise _C.TypeError(f"strata.jit kernel '{self.__name__}': argument {i} is {e}") from None
            types.append(t)
            if device is not None:
                devices.append(device)
            if isinstance(a, _np.ndarray):
                devices.append("cpu")
        kinds = {str(d) for d in devices}
        if len(kinds) > 1:
            raise _C.InvalidArgumentError(f"strata.jit kernel '{self.__name__}': its tensors are on different "
                                          f"devices ({', '.join(sorted(kinds))}); they must share one")
        device = devices[0] if devices else "cpu"
        kind = device if isinstance(device, str) else device.type
        return tuple(types), kind

    def compiled(self, types, kind):
        key = (types, kind)
        with self._lock:
            entry = self._kernels.get(key)
            if entry is None:
                info = self.function_info()
                try:
                    source, name = translate_kernel(info, list(types), kind, self.boundscheck)
                except TranslationError as e:
                    raise _compile_error(info, e) from None
                entry = (RawKernel(source, name, cache=self.cache), source)
                self._kernels[key] = entry
            return entry

    def inspect_source(self, signature=None, device="cpu"):
        """The generated CUDA-dialect source for `signature`: a tuple of type strings ('f32[:]', 'i64', ...) or the
        launch's arguments themselves. Without one, the sources compiled so far, keyed by (types, device type)."""
        if self.device:
            raise TypeError(f"'{self.__name__}' is a device function: inspect the source of a kernel calling it")
        if signature is None:
            return {(tuple(str(t) for t in k[0]), k[1]): v[1] for k, v in self._kernels.items()}
        if all(isinstance(s, str) for s in signature):
            try:
                types = tuple(parse_type(s) for s in signature)
            except ValueError as e:
                raise _C.InvalidArgumentError(str(e)) from None
            kind = device
        else:
            types, kind = self._signature(signature)
        info = self.function_info()
        key = (types, kind)
        if key in self._kernels:
            return self._kernels[key][1]
        try:
            return translate_kernel(info, list(types), kind, self.boundscheck)[0]
        except TranslationError as e:
            raise _compile_error(info, e) from None

    def launch(self, blocks, threads, shared, args):
        types, kind = self._signature(args)
        kernel, _source = self.compiled(types, kind)
        flat = []
        for a, t in zip(args, types):
            if isinstance(t, ArrayType):
                flat.append(a)
                flat += [int(s) for s in a.shape]
            else:
                flat.append(a)
        try:
            kernel(blocks, threads, tuple(flat), shared_mem=shared)
        except _C.DeviceAssertError as e:
            raise self._python_lines(e, kernel.name) from None

    def _python_lines(self, error, c_name):
        # On the CPU the message names the kernel's .cu file with the #line number, which is the Python line.
        info = self.function_info()
        message = str(error)
        m = re.search(re.escape(c_name) + r"\.cu:(\d+)", message)
        if m:
            line = int(m.group(1))
            message = message.replace(m.group(0), f"{info.file}:{line}")
            text = info.text(line)
            if text:
                message += f"\n    {text}"
        return type(error)(message)


class _Launch:
    def __init__(self, dispatcher, blocks, threads, shared):
        self.dispatcher, self.blocks, self.threads, self.shared = dispatcher, blocks, threads, shared

    def __call__(self, *args):
        self.dispatcher.launch(self.blocks, self.threads, self.shared, args)


def jit(fn=None, *, device=False, boundscheck=True, cache=True):
    """Compiles a Python function into a kernel (or, with device=True, a function kernels call), as Numba's cuda.jit.
    boundscheck=False drops the asserts that check every array index. Compiled kernels are kept in memory per
    signature; cache=False keeps them out of the disk cache (RawKernel's), which otherwise spares a second process the
    compile."""
    if fn is None:
        return lambda f: Dispatcher(f, device=device, boundscheck=boundscheck, cache=cache)
    if isinstance(fn, str) or isinstance(fn, (tuple, list)):
        raise TypeError("strata.jit takes no signature: kernels compile per signature at their launch")
    return Dispatcher(fn, device=device, boundscheck=boundscheck, cache=cache)
