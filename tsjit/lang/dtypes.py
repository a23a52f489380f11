"""Scalar data types of the device language.

Each dtype is a singleton :class:`DType` (``Int8 … Int64``, ``Uint8 … Uint64``,
``Float16``, ``BFloat16``, ``Float32``, ``Float64``, ``Boolean``).  A dtype is a
compile-time value: kernels may pass dtypes around, compare them in ``const_expr``
and use them in module-level constants (they are part of the cache key by name).

Calling a dtype converts: ``tsjit.Float32(x)`` inside device code casts a value,
``tsjit.Int32(3)`` makes a typed constant.  The conversion is :func:`tsjit.lang.values.cast_to`,
which :mod:`tsjit.lang.values` registers here when it loads (:func:`set_value_converter`), so
that this module imports nothing from the device language.

Promotion rules (binary operators on two device values, :func:`promote`):

1. equal dtypes: no change;
2. a float and an int/bool: the float type;
3. two floats: the wider one; ``Float16`` with ``BFloat16`` gives ``Float32``;
4. two ints: the wider one; at equal width a signed and an unsigned give the
   unsigned type (C's usual arithmetic conversions);
5. ``Boolean`` with an int: the int type.

A Python ``int``/``float``/``bool`` literal combined with a device value takes the
value's dtype (``x + 1`` keeps ``x`` an Int16), except that a Python float combined
with an integer value gives ``Float32``.

:class:`TensorAnnotation` (what ``tsjit.Tensor[dtype, rank]`` evaluates to) lives here too, so that the
launcher checks an annotated argument without loading the device language.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from tsjit.errors import CompilationError

#: ``cast_to(value, dtype)`` of :mod:`tsjit.lang.values`, registered by it (see ``DType.__call__``).
_value_converter: Callable | None = None


def set_value_converter(convert: Callable) -> None:
    """Register ``convert(value, dtype)``, the conversion behind ``DType.__call__``
    (called once, by :mod:`tsjit.lang.values`)."""
    global _value_converter
    _value_converter = convert


@dataclass(frozen=True, eq=False)
class DType:
    """A scalar device type.

    Attributes:
        name: the public name (``"Int32"``).
        kind: ``"int"``, ``"uint"``, ``"float"`` or ``"bool"``.
        bits: storage width in bits (Boolean is stored as 8 bits in memory, i1 in registers).
        numpy_name: the numpy dtype name used for host arrays (``"bfloat16"`` has none
            in numpy; host arrays of it are ``uint16`` bit patterns).
    """

    name: str
    kind: str
    bits: int
    numpy_name: str

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """True for signed and unsigned integers (not Boolean)."""
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind == "int"

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def itemsize(self) -> int:
        """Bytes per element in memory."""
        return max(1, self.bits // 8)

    @property
    def numpy(self) -> "numpy.dtype":
        """The numpy dtype of host arrays of this type."""
        import numpy  # lazily: numpy costs ~70 ms to import; the TS model and `import tsjit` need none
        return numpy.dtype(self.numpy_name)

    def __repr__(self) -> str:
        return f"tsjit.{self.name}"

    def __call__(self, value):
        """Convert ``value`` (a device value or a Python number) to this dtype, in device code.

        Raises:
            CompilationError: called where no device code is compiling.
        """
        if _value_converter is None:
            raise CompilationError(f"tsjit.{self.name}(...) converts device values: call it in kernel "
                                   f"code (or in compile-time code a kernel runs)")
        return _value_converter(value, self)

    def __reduce__(self):
        return (by_name, (self.name,))


Int8 = DType("Int8", "int", 8, "int8")
Int16 = DType("Int16", "int", 16, "int16")
Int32 = DType("Int32", "int", 32, "int32")
Int64 = DType("Int64", "int", 64, "int64")
Uint8 = DType("Uint8", "uint", 8, "uint8")
Uint16 = DType("Uint16", "uint", 16, "uint16")
Uint32 = DType("Uint32", "uint", 32, "uint32")
Uint64 = DType("Uint64", "uint", 64, "uint64")
Float16 = DType("Float16", "float", 16, "float16")
BFloat16 = DType("BFloat16", "float", 16, "uint16")
Float32 = DType("Float32", "float", 32, "float32")
Float64 = DType("Float64", "float", 64, "float64")
Boolean = DType("Boolean", "bool", 1, "bool")

ALL_DTYPES: tuple[DType, ...] = (Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64,
                                 Float16, BFloat16, Float32, Float64, Boolean)

# Storage-only 8-bit floats (OCP FP8): element types of shared-memory tiles and wgmma operands
# (PTX ``.e4m3`` / ``.e5m2``).  They have no arithmetic in device code, no kernel-argument
# or numpy form (host data is ``uint8`` bit patterns), and are not in ALL_DTYPES.
Float8E4M3 = DType("Float8E4M3", "float", 8, "uint8")
Float8E5M2 = DType("Float8E5M2", "float", 8, "uint8")
STORAGE_ONLY_DTYPES: tuple[DType, ...] = (Float8E4M3, Float8E5M2)

_BY_NAME = {d.name: d for d in ALL_DTYPES + STORAGE_ONLY_DTYPES}


def by_name(name: str) -> DType:
    """The dtype called ``name`` (``"Float32"``); raises ``KeyError`` for unknown names."""
    return _BY_NAME[name]


@functools.cache
def _by_numpy() -> dict:
    import numpy as np  # lazily: as in DType.numpy
    return {np.dtype(d.numpy_name): d for d in ALL_DTYPES if d is not BFloat16}


def from_numpy(dtype) -> DType | None:
    """The dtype matching a numpy dtype (or anything ``np.dtype`` accepts), or ``None``.

    ``uint16`` maps to ``Uint16``; a bfloat16 array must be declared explicitly.
    """
    import numpy as np  # lazily: as in DType.numpy
    try:
        return _by_numpy().get(np.dtype(dtype))
    except TypeError:
        return None


_EXTRA_NAMES = {"bfloat16": BFloat16, "bf16": BFloat16, "half": Float16, "float": Float32, "double": Float64,
                "bool": Boolean}


def lookup(value) -> DType | None:
    """The tsjit dtype ``value`` names, or ``None``: a :class:`DType` (itself), a numpy dtype or
    scalar type (``np.float32``, ``np.dtype('float16')``), or a name: tsjit's (``"BFloat16"``), numpy's
    (``"float32"``) or torch's (``"torch.bfloat16"``, ``"half"``)."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        name = value[6:] if value.startswith("torch.") else value
        found = _BY_NAME.get(name) or _EXTRA_NAMES.get(name.lower())
        if found is not None:
            return found
        value = name
    return from_numpy(value)


def promote(a: DType, b: DType) -> DType:
    """The result dtype of a binary arithmetic operator on values of dtypes ``a`` and ``b``.

    See the module docstring for the rules.
    """
    if a is b:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            if a.bits == b.bits:  # Float16 with BFloat16
                return Float32
            return a if a.bits > b.bits else b
        return a if a.is_float else b
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.kind == "uint" else b


def int_type(bits: int, signed: bool = True) -> DType:
    """The integer dtype of ``bits`` width (8, 16, 32 or 64)."""
    return _BY_NAME[("Int" if signed else "Uint") + str(bits)]


class TensorAnnotation:
    """What ``tsjit.Tensor[dtype, rank]`` evaluates to: a kernel-parameter annotation that makes the
    launcher check the argument's element type and rank (``LaunchError`` naming the argument)."""

    def __init__(self, dtype: DType | None, rank: int | None):
        self.dtype = dtype
        self.rank = rank

    def __repr__(self) -> str:
        return f"tsjit.Tensor[{self.dtype.name if self.dtype else 'Any'}, {self.rank}]"

    def check(self, name: str, dtype: DType, rank: int) -> str | None:
        """The problem with an argument of ``dtype`` and ``rank``, or ``None``."""
        if self.dtype is not None and dtype is not self.dtype:
            return f"argument '{name}' must be a {self.dtype.name} array; got a {dtype.name} array"
        if self.rank is not None and rank != self.rank:
            return f"argument '{name}' must have rank {self.rank}; got rank {rank}"
        return None
