"""strata.save and strata.load: checkpoints in safetensors files, written atomically and never unpickled.

Note [What strata.save writes]
A dict of str -> tensor on the CPU (a state_dict) becomes a plain safetensors file, which safetensors and other
tools read too. Anything else a checkpoint holds -- nested dicts, lists and tuples of tensors, numbers, strings,
bytes, None, dtypes and devices, tensors on other devices, tensors that require grad, Parameters -- is written as
a safetensors file as well: each tensor an entry named by its path in the object ("optimizer_state_dict/0.exp_avg"),
and the structure as JSON in the metadata under "strata.structure". Loading rebuilds the object from that JSON and
runs no code from the file, so every load is as safe as PyTorch's weights_only=True. Other objects are refused at
save with a TypeError naming where they are. Tensors are pickled and deep-copied through the same bytes
(Tensor.__reduce_ex__ and __deepcopy__, attached below).
"""
import base64
import collections
import collections.abc
import io
import json
import math
import os

import numpy as np

from strata import _C

_STRUCTURE_KEY = "strata.structure"
_FORMAT = 1  # the structure's version, for readers of later files


class _Encoder:
    """Turns an object into JSON-able structure and a dict of tensors by entry name."""

    def __init__(self):
        self.tensors = {}
        self.names_by_id = {}  # a tensor met twice is stored once and loaded as one object

    def entry_name(self, path):
        name = "/".join(path) or "tensor"
        # Names must be UTF-8 (a str key may hold lone surrogates) and must not be the format's own key.
        name = name.encode("utf-8", "backslashreplace").decode("utf-8")
        base, n = name, 1
        while name in self.tensors or name == "__metadata__":
            n += 1
            name = f"{base}#{n}"
        return name

    def encode(self, obj, path):
        from strata.nn import Parameter  # strata.nn imports this package

        if obj is None or isinstance(obj, (bool, str, np.bool_)):
            return obj if not isinstance(obj, np.bool_) else bool(obj)
        if isinstance(obj, (int, np.integer)):
            return int(obj)
        if isinstance(obj, (float, np.floating)):
            value = float(obj)
            return value if math.isfinite(value) else {"float": repr(value)}
        if isinstance(obj, _C.Tensor):
            key = id(obj)
            if key not in self.names_by_id:
                name = self.entry_name(path)
                self.tensors[name] = obj.detach()
                self.names_by_id[key] = name
            out = {"tensor": self.names_by_id[key], "device": str(obj.device)}
            if obj.requires_grad:
                out["requires_grad"] = True
            if isinstance(obj, Parameter):
                out["parameter"] = True
            return out
        if isinstance(obj, (bytes, bytearray)):
            return {"bytes": base64.b64encode(bytes(obj)).decode("ascii")}
        if isinstance(obj, _C.dtype):
            return {"dtype": repr(obj).removeprefix("strata.")}
        if isinstance(obj, _C.device):
            return {"device": str(obj)}
        if isinstance(obj, dict):
            items = [[self.encode(k, path + [f"<key {i}>"]), self.encode(v, path + [_part(k)])]
                     for i, (k, v) in enumerate(obj.items())]
            out = {"dict": items}
            if isinstance(obj, collections.OrderedDict):
                out["ordered"] = True
            return out
        if isinstance(obj, (list, tuple)):
            kind = "list" if isinstance(obj, list) else "tuple"
            return {kind: [self.encode(v, path + [str(i)]) for i, v in enumerate(obj)]}
        where = "".join(f"[{p!r}]" for p in path) or " itself"
        raise TypeError(
            f"strata.save: the object{where} is a {type(obj).__module__}.{type(obj).__qualname__}; strata.save "
            "stores tensors, numbers, strings, bytes, None, dtypes, devices, and dicts, lists and tuples of them "
            "(it never pickles, so that loading a file never runs its code): save such an object's state_dict() or "
            "its fields instead")


def _part(key):
    return key if isinstance(key, str) else repr(key)


def _is_plain(obj):
    """A state_dict that a plain safetensors file holds whole: str keys, plain CPU tensors without grad."""
    return type(obj) in (dict, collections.OrderedDict) and all(
        isinstance(k, str) and type(v) is _C.Tensor and not v.requires_grad and v.device.type == "cpu"
        for k, v in obj.items())


class _Decoder:
    """Rebuilds what _Encoder wrote. The structure comes from the file, so every node is checked: a hostile one gives
    an IOError, never another object or a crash."""

    def __init__(self, tensors, place):
        self.tensors, self.place = tensors, place
        self.done = {}  # entry name -> the tensor built, so that shared tensors stay shared

    def decode(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        kind = next(iter(node), None) if isinstance(node, dict) else None
        value = node[kind] if kind is not None else None
        if kind == "tensor" and isinstance(value, str):
            return self.tensor(node)
        if kind == "float" and value in ("nan", "inf", "-inf"):
            return float(value)
        if kind == "bytes" and isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except ValueError:
                pass
        if kind == "dtype" and isinstance(getattr(_C, str(value), None), _C.dtype):
            return getattr(_C, value)
        if kind == "device" and isinstance(value, str):
            return _C.device(value)
        if kind == "dict" and isinstance(value, list) and all(isinstance(i, list) and len(i) == 2 for i in value):
            out = collections.OrderedDict() if node.get("ordered") else {}
            for k, v in value:
                key = self.decode(k)
                if not isinstance(key, collections.abc.Hashable):
                    break
                out[key] = self.decode(v)
            else:
                return out
        if kind in ("list", "tuple") and isinstance(value, list):
            items = [self.decode(v) for v in value]
            return items if kind == "list" else tuple(items)
        raise _C.IOError(f"strata.load: the file's structure holds {str(node)[:80]!r}, which is not something "
                         "strata.save writes (a damaged file, or one written by a later version)")

    def tensor(self, node):
        name = node["tensor"]
        if name not in self.done:
            if name not in self.tensors:
                raise _C.IOError(f"strata.load: the file's structure names the tensor {name!r}, which it lacks")
            t = self.place(self.tensors[name], str(node.get("device", "cpu")))
            requires_grad = bool(node.get("requires_grad", False))
            if node.get("parameter"):
                from strata.nn import Parameter

                t = Parameter(t, requires_grad=requires_grad)
            elif requires_grad:
                t = t.detach().requires_grad_(True)
            self.done[name] = t
        return self.done[name]


def _path(f, op):
    """`f` as the bytes of a path when it is one (str, bytes, os.PathLike), else None."""
    if not isinstance(f, (str, bytes, os.PathLike)):
        return None
    path = os.fsencode(f)  # bytes as the file system has them, so any name, UTF-8 or not, round-trips
    if b"\0" in path:
        raise ValueError(f"{op}: embedded null byte in the path {os.fsdecode(path)!r}")
    return path


def _name_of(f):
    name = getattr(f, "name", None)
    return name if isinstance(name, str) else f"<{type(f).__name__}>"


def _refuse_target(f, op, needs):
    raise TypeError(f"{op}: f must be a path (str, bytes or os.PathLike) or a binary file object with {needs}(); got "
                    f"{type(f).__name__}")


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True, *, metadata=None):
    """Writes `obj` to `f`, a path (written atomically) or a binary file object, as PyTorch's torch.save. A dict of
    CPU tensors by name becomes a plain safetensors file (safetensors' save_file); checkpoints of nested dicts, lists,
    numbers and strings are kept whole (Note [What strata.save writes]). `metadata`: free-form strings for the
    header. pickle_module and pickle_protocol are accepted and unused: nothing is pickled."""
    metadata = dict(metadata or {})
    if _STRUCTURE_KEY in metadata:
        raise ValueError(f"strata.save: the metadata key {_STRUCTURE_KEY!r} is Strata's own; choose another")
    if _is_plain(obj):
        tensors = obj
    else:
        encoder = _Encoder()
        structure = encoder.encode(obj, [])
        tensors = encoder.tensors
        metadata[_STRUCTURE_KEY] = json.dumps({"format": _FORMAT, "object": structure}, separators=(",", ":"),
                                              allow_nan=False)
    path = _path(f, "strata.save")
    if path is not None:
        _C.save_file(tensors, path, metadata or None)
    elif callable(getattr(f, "write", None)):
        if isinstance(f, io.TextIOBase):
            raise TypeError("strata.save: the file is open in text mode; open it in binary mode ('wb')")
        f.write(_C._save_bytes(tensors, metadata or None, _name_of(f)))
    else:
        _refuse_target(f, "strata.save", "write")


def _read(f, device):
    """The entries and metadata of `f`, a path or a binary file object, with the tensors on `device`."""
    path = _path(f, "strata.load")
    if path is not None:
        return _C.load_file_with_metadata(path, device)
    if not callable(getattr(f, "read", None)):
        _refuse_target(f, "strata.load", "read")
    data = f.read()
    if isinstance(data, str):
        raise TypeError("strata.load: the file is open in text mode; open it in binary mode ('rb')")
    return _C._load_bytes(bytes(data), device, _name_of(f))


def _placer(map_location):
    """A function (tensor on the CPU, the device it was saved from) -> the tensor where map_location puts it."""
    if map_location is None:
        return _to
    if isinstance(map_location, (str, _C.device)):
        return lambda t, saved: _to(t, map_location)
    if isinstance(map_location, dict):
        table = {str(k): v for k, v in map_location.items()}
        return lambda t, saved: _to(t, table.get(saved, saved))
    if callable(map_location):
        def place(t, saved):
            # PyTorch calls it with a storage and the saved location; Strata has no storages, so with the tensor.
            result = map_location(t, saved)
            if result is None:
                return _to(t, saved)
            return result if isinstance(result, _C.Tensor) else _to(t, result)
        return place
    raise TypeError(f"strata.load: map_location must be None, a device, a str, a dict or a callable; got "
                    f"{type(map_location).__name__}")


def _to(t, device):
    if not isinstance(device, (str, _C.device)):
        raise TypeError(f"strata.load: map_location gave {device!r}, which is not a device")
    try:
        return t.to(_C.device(device) if isinstance(device, str) else device)
    except _C.DeviceUnavailableError as e:
        raise _C.DeviceUnavailableError(f"strata.load: {e}; pass map_location='cpu' to load the tensors on the CPU") \
            from None


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, device=None, **pickle_load_args):
    """Reads what strata.save wrote (or any safetensors file, as a dict of tensors by name) from `f`, a path or a
    binary file object, as PyTorch's torch.load. map_location: where tensors go (a device or str, a dict from saved
    to new locations, or a callable(tensor, saved_location)); by default each goes back to the device it was saved
    from, and a plain safetensors file to the CPU. `device` is safetensors' name for it. weights_only is accepted
    and always in force: a file's contents are data, never code."""
    if pickle_module is not None or pickle_load_args:
        raise NotImplementedError("strata.load never unpickles, so torch.load's pickle_module and pickle arguments "
                                  "have no use: leave them out")
    if mmap:
        raise NotImplementedError("torch.load(mmap=True) is not implemented: strata.load reads the file into "
                                  "memory; leave mmap out")
    if device is not None:
        if map_location is not None:
            raise TypeError("strata.load: give map_location or device, not both")
        map_location = device
    one_device = map_location if isinstance(map_location, (str, _C.device)) else "cpu"
    tensors, metadata = _read(f, one_device)
    text = metadata.get(_STRUCTURE_KEY)
    # Tensors are read straight onto one map_location device; else onto the CPU, and placed one by one.
    place = _placer(map_location) if one_device == "cpu" else (lambda t, saved: t)
    if text is None:
        return {name: place(t, "cpu") for name, t in tensors.items()}
    try:
        structure = json.loads(text)
        if structure.get("format", _FORMAT) > _FORMAT:
            raise _C.IOError(f"strata.load: the file's structure is of format {structure['format']}, written by a "
                             f"later version of Strata; this one reads format {_FORMAT}")
        return _Decoder(tensors, place).decode(structure["object"])
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        if isinstance(e, _C.Error):
            raise
        raise _C.IOError(f"strata.load: the file's {_STRUCTURE_KEY!r} metadata is not a structure strata.save writes "
                         f"({type(e).__name__}: {e})") from None


def load_file(filename, device="cpu"):
    """safetensors' load_file: the file's entries as a dict of tensors on `device`."""
    path = _path(filename, "strata.load_file")
    if path is None:
        _refuse_target(filename, "strata.load_file", "read")
    return _C.load_file_with_metadata(path, device)[0]


def save_file(tensors, filename, metadata=None):
    """safetensors' save_file: a dict of tensors by name, written atomically."""
    path = _path(filename, "strata.save_file")
    if path is None:
        _refuse_target(filename, "strata.save_file", "write")
    _C.save_file(tensors, path, metadata)


def load_metadata(filename):
    """The free-form string metadata of a safetensors file (without Strata's own structure)."""
    metadata = _read(filename, "cpu")[1]
    metadata.pop(_STRUCTURE_KEY, None)
    return metadata


# --- pickling and deep copies of tensors -------------------------------------------------------------------------

def _rebuild_tensor(cls, data, device, requires_grad):
    """Unpickles a tensor from the safetensors bytes _reduce_ex wrote (data, never code)."""
    from strata.nn import Parameter

    t = _C._load_bytes(data, "cpu", "<pickled tensor>")[0]["t"].to(_C.device(device))
    if issubclass(cls, Parameter):
        return cls(t, requires_grad=requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    if cls is _C.Tensor:
        return t
    out = cls.__new__(cls)
    _C.Tensor.__init__(out, t)
    return out


def _reduce_ex(self, protocol):
    data = _C._save_bytes({"t": self.detach()}, None, "<pickled tensor>")
    return _rebuild_tensor, (type(self), data, str(self.device), self.requires_grad)


def _deepcopy(self, memo):
    if id(self) in memo:
        return memo[id(self)]
    if not self.is_leaf:
        raise _C.InvalidArgumentError(
            "copy.deepcopy: only tensors created by the user (graph leaves) can be deep-copied, as in PyTorch; "
            "deep-copy t.detach() instead")
    from strata.nn import Parameter

    new = self.detach().clone()
    if isinstance(self, Parameter):
        new = type(self)(new, requires_grad=self.requires_grad)
    elif self.requires_grad:
        new.requires_grad_(True)
    if self.grad is not None:
        new.grad = self.grad.detach().clone()
    memo[id(self)] = new
    return new


_C.Tensor.__reduce_ex__ = _reduce_ex
_C.Tensor.__deepcopy__ = _deepcopy
