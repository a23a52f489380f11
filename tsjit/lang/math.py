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
from tsjit.lang.values import Value, as_value, cast_to, unify, constant

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def _suffix(dtype) -> str:
    return {16: "f16", 32: "f32", 64: "f64"}[dtype.bits] if dtype.is_float else f"i{dtype.bits}"


def _float_operand(x, name: str) -> tuple[Value, dt.DType]:
    if not isinstance(x, Value):
        x = constant(float(x), dt.Float32)
    if not x.dtype.is_float:
        raise CompilationError(f"tsjit.math.{name} needs a floating-point operand, got {x.dtype.name}; "
                               f"convert it first, e.g. tsjit.Float32(x)")
    original = x.dtype
    if original.bits == 16:
        x = cast_to(x, dt.Float32)
    return x, original


def _call(name: str, *args: Value) -> object:
    return emit.current().intrinsic(name, [a.ir for a in args])


def _unary_f32(x, name: str, nvvm: str, f64: str | None = None) -> Value:
    v, original = _float_operand(x, name)
    if v.dtype is dt.Float64:
        if f64 is None:
            raise CompilationError(f"tsjit.math.{name} is not available for Float64 (no accurate PTX "
                                   f"instruction); convert to Float32 if its precision is enough")
        return Value(_call(f64, v), dt.Float64)
    return cast_to(Value(_call(nvvm, v), dt.Float32), original)


def sqrt(x) -> Value:
    """Square root, IEEE round-to-nearest (PTX ``sqrt.rn``). Float16/32/64."""
    return _unary_f32(x, "sqrt", "llvm.sqrt.f32", "llvm.sqrt.f64")


def rsqrt(x) -> Value:
    """``1/sqrt(x)`` (PTX ``rsqrt.approx.f32``). Float32 and narrower."""
    return _unary_f32(x, "rsqrt", "llvm.nvvm.rsqrt.approx.f")


def exp2(x) -> Value:
    """``2**x`` (PTX ``ex2.approx.f32``)."""
    return _unary_f32(x, "exp2", "llvm.nvvm.ex2.approx.f")


def log2(x) -> Value:
    """``log2(x)`` (PTX ``lg2.approx.f32``)."""
    return _unary_f32(x, "log2", "llvm.nvvm.lg2.approx.f")


def exp(x) -> Value:
    """``e**x`` computed as ``exp2(x * log2(e))``."""
    v, original = _float_operand(x, "exp")
    return cast_to(exp2(v * LOG2E), original)


def log(x) -> Value:
    """Natural logarithm computed as ``log2(x) * ln(2)``."""
    v, original = _float_operand(x, "log")
    return cast_to(log2(v) * LN2, original)


def sin(x) -> Value:
    """Sine (PTX ``sin.approx.f32``; absolute error 2**-20.9 in [-pi, pi])."""
    return _unary_f32(x, "sin", "llvm.nvvm.sin.approx.f")


def cos(x) -> Value:
    """Cosine (PTX ``cos.approx.f32``)."""
    return _unary_f32(x, "cos", "llvm.nvvm.cos.approx.f")


def floor(x) -> Value:
    """Largest integer-valued float <= x."""
    v, original = _float_operand(x, "floor")
    return cast_to(Value(_call(f"llvm.floor.{_suffix(v.dtype)}", v), v.dtype), original)


def ceil(x) -> Value:
    """Smallest integer-valued float >= x."""
    v, original = _float_operand(x, "ceil")
    return cast_to(Value(_call(f"llvm.ceil.{_suffix(v.dtype)}", v), v.dtype), original)


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
    return cast_to(Value(_call(f"llvm.fma.{_suffix(work)}", x, y, z), work), dtype)


def abs(x):
    """Absolute value (integers wrap for the most negative value, as in C)."""
    if not isinstance(x, Value):
        return builtins.abs(x)
    if x.dtype.is_float:
        v, original = _float_operand(x, "abs")
        return cast_to(Value(_call(f"llvm.fabs.{_suffix(v.dtype)}", v), v.dtype), original)
    if not x.dtype.is_signed:
        return x
    from llvmlite import ir
    fn_name = f"llvm.abs.{_suffix(x.dtype)}"
    return Value(emit.current().intrinsic(fn_name, [x.ir, ir.Constant(ir.IntType(1), 0)]), x.dtype)


def _minmax(a, b, is_min: bool):
    if not isinstance(a, Value) and not isinstance(b, Value):
        return builtins.min(a, b) if is_min else builtins.max(a, b)
    x, y, dtype = unify(a, b)
    if dtype.is_bool:
        x, y, dtype = cast_to(x, dt.Int32), cast_to(y, dt.Int32), dt.Int32
    if dtype.is_float:
        work = dt.Float32 if dtype.bits == 16 else dtype
        x, y = cast_to(x, work), cast_to(y, work)
        name = f"llvm.{'minnum' if is_min else 'maxnum'}.{_suffix(work)}"
        return cast_to(Value(_call(name, x, y), work), dtype)
    kind = ("s" if dtype.is_signed else "u") + ("min" if is_min else "max")
    return Value(_call(f"llvm.{kind}.{_suffix(dtype)}", x, y), dtype)


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
