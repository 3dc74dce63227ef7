"""The types of strata.jit's numeric subset, and how arguments map to them.

A scalar type is one of the names below. The rule for arithmetic is C's, which is also what the generated source
does: bool and uint8 promote to int32, then the wider of the two operands wins, and any float beats any integer
(int64 + float32 is float32). Python's own numbers are int64 (an int) and float64 (a float); an array's element has
the array's dtype. A local's type is the promotion of everything assigned to it in the function (a local assigned
an int and later a float is a double throughout). `/` always gives a float (float64 from two integers), as Python's.
"""

import re

import numpy as _np

# name -> C type. Order is the promotion rank.
C_TYPES = {"bool": "bool", "u8": "unsigned char", "i32": "int", "i64": "long long", "f32": "float", "f64": "double"}
RANK = {name: i for i, name in enumerate(C_TYPES)}
FLOATS = ("f32", "f64")
INTS = ("bool", "u8", "i32", "i64")

_STRATA_DTYPES = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "bool",
                  "float": "f32", "double": "f64", "int": "i32", "long": "i64"}


def is_float(t):
    return t in FLOATS


def is_int(t):
    return t in INTS


def promote(a, b):
    """C's usual arithmetic conversions on the types above."""
    return max(a, b, "i32", key=RANK.__getitem__)


def unify(a, b):
    """The type of a local assigned values of types a and b (None: not assigned yet)."""
    if a is None or a == b:
        return b
    return max(a, b, key=RANK.__getitem__)


def dtype_name(dtype):
    """'f32', ... for a strata dtype, a NumPy dtype or scalar type, or a string naming one; None otherwise."""
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type) and issubclass(dtype, _np.generic):
        name = _np.dtype(dtype).name
    elif isinstance(dtype, _np.dtype):
        name = dtype.name
    elif dtype is float:
        return "f64"
    elif dtype is int:
        return "i64"
    elif dtype is bool:
        return "bool"
    else:
        name = str(dtype)
    name = name.removeprefix("strata.")
    if name in C_TYPES:
        return name
    return _STRATA_DTYPES.get(name)


class ArrayType:
    """An array argument (a tensor or a NumPy array), a shared or a local array: element type and rank."""

    def __init__(self, dtype, rank):
        self.dtype, self.rank = dtype, rank

    def __eq__(self, other):
        return isinstance(other, ArrayType) and (self.dtype, self.rank) == (other.dtype, other.rank)

    def __hash__(self):
        return hash((self.dtype, self.rank))

    def __str__(self):
        return f"{self.dtype}[{', '.join([':'] * self.rank)}]"

    __repr__ = __str__


_SIGNATURE_ITEM = re.compile(r"^\s*(\w+)\s*(?:\[\s*(:(?:\s*,\s*:)*)\s*\])?\s*$")


def parse_type(text):
    """'f32[:, :]' -> ArrayType('f32', 2); 'i64' -> 'i64'. ValueError for anything else."""
    m = _SIGNATURE_ITEM.match(text)
    name = m and dtype_name(m.group(1))
    if not name:
        raise ValueError(f"'{text}' is not a type of strata.jit (a scalar: {', '.join(C_TYPES)}; an array: 'f32[:]', "
                         "'f64[:, :]', ...)")
    return ArrayType(name, m.group(2).count(":")) if m.group(2) else name


def type_of_argument(value):
    """The signature's item for one launch argument, and its device ('cpu' for NumPy arrays and numbers)."""
    if isinstance(value, _np.ndarray):
        name = dtype_name(value.dtype)
        if name is None:
            raise TypeError(f"a NumPy array of {value.dtype} (strata.jit takes {', '.join(C_TYPES)})")
        return ArrayType(name, value.ndim), None
    if hasattr(value, "is_contiguous") and hasattr(value, "dtype") and hasattr(value, "device"):
        name = dtype_name(value.dtype)
        if name is None:
            raise TypeError(f"a tensor of {value.dtype} (strata.jit takes {', '.join(C_TYPES)})")
        return ArrayType(name, value.dim()), value.device
    if isinstance(value, (bool, _np.bool_)):
        return "bool", None
    if isinstance(value, _np.generic):
        name = dtype_name(value.dtype)
        if name is None:
            raise TypeError(f"a NumPy {value.dtype} scalar")
        return name, None
    if isinstance(value, int):
        return "i64", None
    if isinstance(value, float):
        return "f64", None
    raise TypeError(f"a {type(value).__name__} (strata.jit takes tensors, NumPy arrays, ints, floats and bools)")
