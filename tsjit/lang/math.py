"""``tsjit.math``: scalar math on device values.

Float16/BFloat16 operands are computed in Float32 and converted back.  Float32
transcendental functions use the PTX approximate instructions (``ex2.approx``,
``lg2.approx``, ``rsqrt.approx``, ``sin/cos.approx``: PTX ISA 8.x §9.7.3, max error
2 ulp for ``ex2``/``lg2`` on the full range), exactly as CUDA's ``__expf``-style fast
paths; ``sqrt`` is IEEE round-to-nearest (``sqrt.rn``), ``fma`` is a single rounding.
Float64 supports ``sqrt``, ``fma``, ``abs``, ``floor``, ``ceil``, ``min``, ``max``;
the other Float64 functions raise :class:`CompilationError` rather than silently
losing precision.
"""
from __future__ import annotations

import builtins
import math as _pymath

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.values import (EXP2_APPROX, LOG2_APPROX, Value, absolute, as_value, cast_to, float_operand,
                               intrinsic_suffix, float_unary, unify)

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def _call(name: str, *args: Value) -> object:
    return emit.current().intrinsic(name, [a.ir for a in args])


def sqrt(x) -> Value:
    """Square root, IEEE round-to-nearest (PTX ``sqrt.rn``). Float16/32/64."""
    return float_unary(x, "sqrt", "llvm.sqrt.f32", "llvm.sqrt.f64")


def rsqrt(x) -> Value:
    """``1/sqrt(x)`` (PTX ``rsqrt.approx.f32``). Float32 and narrower."""
    return float_unary(x, "rsqrt", "llvm.nvvm.rsqrt.approx.f")


def exp2(x) -> Value:
    """``2**x`` (PTX ``ex2.approx.f32``)."""
    return float_unary(x, "exp2", EXP2_APPROX)


def log2(x) -> Value:
    """``log2(x)`` (PTX ``lg2.approx.f32``)."""
    return float_unary(x, "log2", LOG2_APPROX)


def exp(x) -> Value:
    """``e**x`` computed as ``exp2(x * log2(e))``."""
    v, original = float_operand(x, "exp")
    return cast_to(exp2(v * LOG2E), original)


def log(x) -> Value:
    """Natural logarithm computed as ``log2(x) * ln(2)``."""
    v, original = float_operand(x, "log")
    return cast_to(log2(v) * LN2, original)


def sin(x) -> Value:
    """Sine (PTX ``sin.approx.f32``; absolute error 2**-20.9 in [-pi, pi])."""
    return float_unary(x, "sin", "llvm.nvvm.sin.approx.f")


def cos(x) -> Value:
    """Cosine (PTX ``cos.approx.f32``)."""
    return float_unary(x, "cos", "llvm.nvvm.cos.approx.f")


def floor(x) -> Value:
    """Largest integer-valued float <= x."""
    return float_unary(x, "floor", "llvm.floor.f32", "llvm.floor.f64")


def ceil(x) -> Value:
    """Smallest integer-valued float >= x."""
    return float_unary(x, "ceil", "llvm.ceil.f32", "llvm.ceil.f64")


def fma(a, b, c) -> Value:
    """``a * b + c`` with a single rounding (PTX ``fma.rn``)."""
    ref = next((v for v in (a, b, c) if isinstance(v, Value)), None)
    dtype = ref.dtype if ref is not None else dt.Float32
    for v in (a, b, c):
        if isinstance(v, Value):
            dtype = dt.promote(dtype, v.dtype)
    if not dtype.is_float:
        raise CompilationError(f"tsjit.math.fma needs floating-point operands, got {dtype.name}")
    work = dt.Float32 if dtype.bits == 16 else dtype
    x, y, z = (cast_to(as_value(v, work), work) for v in (a, b, c))
    return cast_to(Value(_call(f"llvm.fma.{intrinsic_suffix(work)}", x, y, z), work), dtype)


def abs(x):
    """Absolute value (integers wrap for the most negative value, as in C)."""
    if not isinstance(x, Value):
        return builtins.abs(x)
    return absolute(x)


def _minmax(a, b, is_min: bool):
    if not isinstance(a, Value) and not isinstance(b, Value):
        return builtins.min(a, b) if is_min else builtins.max(a, b)
    x, y, dtype = unify(a, b)
    if dtype.is_bool:
        x, y, dtype = cast_to(x, dt.Int32), cast_to(y, dt.Int32), dt.Int32
    if dtype.is_float:
        work = dt.Float32 if dtype.bits == 16 else dtype
        x, y = cast_to(x, work), cast_to(y, work)
        name = f"llvm.{'minnum' if is_min else 'maxnum'}.{intrinsic_suffix(work)}"
        return cast_to(Value(_call(name, x, y), work), dtype)
    kind = ("s" if dtype.is_signed else "u") + ("min" if is_min else "max")
    return Value(_call(f"llvm.{kind}.{intrinsic_suffix(dtype)}", x, y), dtype)


def min(*args):
    """Minimum of two or more values (floats: IEEE minNum, a NaN operand is ignored)."""
    if len(args) == 1:
        args = tuple(args[0])
    if len(args) < 2:
        raise CompilationError("min() needs at least two operands")
    result = args[0]
    for arg in args[1:]:
        result = _minmax(result, arg, True)
    return result


def max(*args):
    """Maximum of two or more values (floats: IEEE maxNum)."""
    if len(args) == 1:
        args = tuple(args[0])
    if len(args) < 2:
        raise CompilationError("max() needs at least two operands")
    result = args[0]
    for arg in args[1:]:
        result = _minmax(result, arg, False)
    return result


pi = _pymath.pi
e = _pymath.e
inf = _pymath.inf
