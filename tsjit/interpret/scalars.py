"""Scalar semantics of the interpreter: LLVM types, integer wraparound, IEEE float32 rounding.

Register values:

* integers of width ``w``: Python ints in ``[0, 2**w)`` (LLVM integers have no sign; signed
  operations bias by the sign bit: ``(x ^ S) - S``); ``i1`` is 0/1 (or a bool);
* ``float``: a Python float or ``numpy.float32`` whose value is exactly a float32.  Every
  arithmetic result is rounded with :data:`F32` (``numpy.float32``).  ``+ - * /`` and ``sqrt``
  computed in double and rounded once to float32 are correctly rounded (binary64 has more than
  2 * 24 + 2 bits); ``fma`` is made exact by :func:`fma32`;
* ``double``: a Python float; ``half`` / ``bfloat``: a Python float holding the 16-bit value
  (conversions: :mod:`tsjit.interpret.numerics`);
* pointers: Python ints (addresses: :mod:`tsjit.interpret.memory`);
* vectors, structs and arrays: tuples of their elements.
"""
from __future__ import annotations

import math
import struct

import numpy as np
from llvmlite import ir

from tsjit.errors import InterpretError
from tsjit.interpret import numerics

__all__ = ["F32", "fma32", "type_size", "type_align", "kind_of", "mask_of", "to_signed", "constant_value",
           "float_bits", "bits_float", "FLOAT_KINDS"]

F32 = np.float32
FLOAT_KINDS = ("half", "bfloat", "float", "double")
_F32_STRUCT = struct.Struct("<f")
_I32_STRUCT = struct.Struct("<I")
_F64_STRUCT = struct.Struct("<d")
_I64_STRUCT = struct.Struct("<Q")


def kind_of(t) -> str:
    """``"int"``, ``"float"``, ``"double"``, ``"half"``, ``"bfloat"``, ``"ptr"``, ``"vector"``, ``"struct"``,
    ``"array"``, ``"void"`` for an llvmlite type."""
    if isinstance(t, ir.IntType):
        return "int"
    name = str(t)
    if name in FLOAT_KINDS:
        return name
    if isinstance(t, ir.PointerType):
        return "ptr"
    if isinstance(t, ir.VectorType):
        return "vector"
    if isinstance(t, ir.BaseStructType):
        return "struct"
    if isinstance(t, ir.ArrayType):
        return "array"
    if isinstance(t, ir.VoidType):
        return "void"
    return name


def mask_of(t) -> int:
    return (1 << t.width) - 1


def to_signed(x: int, width: int) -> int:
    sign = 1 << (width - 1)
    return (x ^ sign) - sign


def type_size(t) -> int:
    """ABI size in bytes (NVPTX data layout: naturally aligned scalars, 64-bit pointers)."""
    kind = kind_of(t)
    if kind == "int":
        return max(1, (t.width + 7) // 8) if t.width != 1 else 1
    if kind in ("half", "bfloat"):
        return 2
    if kind == "float":
        return 4
    if kind == "double":
        return 8
    if kind == "ptr":
        return 4 if t.addrspace == 6 else 8
    if kind == "vector":
        return type_size(t.element) * t.count
    if kind == "array":
        return type_size(t.element) * t.count
    if kind == "struct":
        offset = 0
        for e in t.elements:
            a = type_align(e)
            offset = (offset + a - 1) // a * a + type_size(e)
        a = type_align(t)
        return (offset + a - 1) // a * a
    raise InterpretError(f"internal error, please report: the interpreter has no size for LLVM type {t}")


def type_align(t) -> int:
    kind = kind_of(t)
    if kind in ("array",):
        return type_align(t.element)
    if kind == "struct":
        return max((type_align(e) for e in t.elements), default=1)
    if kind == "vector":
        return type_size(t)
    return type_size(t)


def struct_offsets(t) -> list[int]:
    offsets, offset = [], 0
    for e in t.elements:
        a = type_align(e)
        offset = (offset + a - 1) // a * a
        offsets.append(offset)
        offset += type_size(e)
    return offsets


def float_bits(x: float, kind: str) -> int:
    """The IEEE bit pattern of register value ``x`` of float type ``kind``."""
    if kind == "float":
        return _I32_STRUCT.unpack(_F32_STRUCT.pack(x))[0]
    if kind == "double":
        return _I64_STRUCT.unpack(_F64_STRUCT.pack(x))[0]
    return numerics.to_bits(float(x), kind)


def bits_float(bits: int, kind: str):
    """The register value of float type ``kind`` with bit pattern ``bits``."""
    if kind == "float":
        return _F32_STRUCT.unpack(_I32_STRUCT.pack(bits & 0xFFFFFFFF))[0]
    if kind == "double":
        return _F64_STRUCT.unpack(_I64_STRUCT.pack(bits & 0xFFFFFFFFFFFFFFFF))[0]
    return numerics.from_bits(bits & 0xFFFF, kind)


def bfloat_of_float(x):
    """``fptrunc float -> bfloat`` (``cvt.rn.bf16.f32``) of a float32 register value: round to nearest
    even on the bit pattern (overflow carries into the exponent: +-inf), NaN kept.  The common
    conversion of every bf16 epilogue, so without the general rounding's layers."""
    if x != x:
        return x
    b = _I32_STRUCT.unpack(_F32_STRUCT.pack(x))[0]
    return _F32_STRUCT.unpack(_I32_STRUCT.pack(((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16))[0]


def bfloat_bits(x) -> int:
    """The 16 bits of a bfloat register value (exactly a bfloat: the top half of its float32 bits)."""
    if x != x:
        return numerics.to_bits(float(x), "bfloat")     # the canonical NaN
    return _I32_STRUCT.unpack(_F32_STRUCT.pack(x))[0] >> 16


def bfloat_of_bits(bits: int) -> float:
    """The bfloat register value of 16 bits ``bits`` (exact)."""
    return _F32_STRUCT.unpack(_I32_STRUCT.pack((bits & 0xFFFF) << 16))[0]


def round_float(x: float, kind: str):
    """``x`` rounded to float type ``kind`` (round to nearest even)."""
    if kind == "float":
        return F32(x)
    if kind == "double":
        return float(x)
    return numerics.round_scalar(float(x), kind)


def fma32(a, b, c):
    """``fma.rn.f32``: ``a * b + c`` rounded once to float32 (IEEE 754 fusedMultiplyAdd).

    ``a * b`` of two float32 values is exact in binary64; ``s = a * b + c`` in binary64 and then
    float32 can round twice only when ``s`` lands exactly halfway between two float32 values while
    the exact sum is not ``s``; that case is detected and the exact error (TwoSum) decides."""
    a, b, c = float(a), float(b), float(c)
    p = a * b
    s = p + c
    r = F32(s)
    if not math.isfinite(s) or float(r) == s:
        return r
    up = np.nextafter(r, F32(np.inf)) if float(r) < s else np.nextafter(r, F32(-np.inf))
    if (float(r) + float(up)) * 0.5 != s:
        return r
    bp = s - c
    err = (p - bp) + (c - (s - bp))           # TwoSum: exact value = s + err
    if err == 0:
        return r
    toward_up = (err > 0) == (float(up) > float(r))
    return up if toward_up else r


def constant_value(c):
    """The register value of an llvmlite constant (undef/poison/zeroinitializer as zero)."""
    t = c.type
    kind = kind_of(t)
    value = getattr(c, "constant", None)
    undefined = value is ir.Undefined or value is None
    if kind == "int":
        return 0 if undefined else int(value) & mask_of(t)
    if kind in FLOAT_KINDS:
        if undefined:
            return 0.0
        if isinstance(value, str):  # bfloat constants are written as 0xR hex bits by tsjit's emitter
            return _float_text(value, kind)
        return round_float(float(value), kind)
    if kind == "ptr":
        return 0
    if kind in ("vector", "array", "struct"):
        elements = t.elements if kind == "struct" else [t.element] * t.count
        if undefined:
            return tuple(constant_value(ir.Constant(e, None)) for e in elements)
        if isinstance(value, (bytes, bytearray)):
            return tuple(value)
        return tuple(constant_value(v) if isinstance(v, ir.Constant) else constant_value(ir.Constant(e, v))
                     for v, e in zip(value, elements))
    raise InterpretError(f"internal error, please report: the interpreter cannot read the constant {c}")


def _float_text(text: str, kind: str):
    text = text.strip()
    if text.startswith("0xR") or text.startswith("0xH"):
        return bits_float(int(text[3:], 16), kind)
    if text.startswith("0x"):
        return round_float(bits_float(int(text[2:], 16), "double"), kind)
    return round_float(float(text), kind)
