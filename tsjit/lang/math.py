"""``tsjit.math``: scalar math on device values.

Float16/BFloat16 operands are computed in Float32 and converted back.  Float32
transcendental functions use the PTX approximate instructions (``ex2.approx``,
``lg2.approx``, ``rsqrt.approx``, ``sin/cos.approx``: PTX ISA 8.x §9.7.3, max error
2 ulp for ``ex2``/``lg2`` on the full range), exactly as CUDA's ``__expf``-style fast
paths; ``sqrt`` is IEEE round-to-nearest (``sqrt.rn``), ``fma`` is a single rounding.
Float64 supports ``sqrt``, ``fma``, ``abs``, ``floor``, ``ceil``, ``min``, ``max``;
the other Float64 functions raise :class:`CompilationError` rather than silently
losing precision.  ``tanh`` and ``erf`` are formulas over ``exp`` (no libdevice): their
error bounds are in their docstrings and measured by ``tests/lang/test_math_functions.py``.

A name that is not here (``tsjit.math.tanhh``) is an :class:`AttributeError` that lists the
functions that are, the closest match first.
"""
from __future__ import annotations

import builtins
import difflib
import math as _pymath

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.values import (EXP2_APPROX, EXP2_APPROX_FTZ, LOG2_APPROX, Value, absolute, as_value, cast_to, float_operand,
                               intrinsic_suffix, float_unary, select, unify)

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


def exp2(x, *, ftz: bool = False) -> Value:
    """``2**x`` (PTX ``ex2.approx.f32``).  ``ftz=True`` flushes subnormal inputs and results to zero
    (``ex2.approx.ftz.f32``): one MUFU.EX2 instruction, without the range fix-up of the subnormal-safe
    form (PTX ISA 8.x §9.7.3.22); results below 2**-126 become 0."""
    return float_unary(x, "exp2", EXP2_APPROX_FTZ if ftz else EXP2_APPROX)


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


# Abramowitz & Stegun 7.1.26 (after Hastings): for x >= 0,
# erf(x) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-x*x), t = 1 / (1 + p x),
# absolute error <= 1.5e-7 in exact arithmetic.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_ERF_SMALL = 0.5           # below: the Maclaurin series through x**11 (relative accuracy near 0)
_ERF_TAYLOR = tuple(2 / _pymath.sqrt(_pymath.pi) * (-1) ** k / (_pymath.factorial(k) * (2 * k + 1)) for k in range(6))
_TANH_SMALL = 0.25          # below: the odd Taylor polynomial through x**7 (no cancellation)
_TANH_TAYLOR = (-1 / 3, 2 / 15, -17 / 315)


def tanh_formula(x, exp_, abs_, where):
    """``tanh`` from ``exp_``/``abs_``/``where`` (device functions, or numpy's to measure it on the
    host): ``sign(x) (1 - e) / (1 + e)`` with ``e = exp(-2|x|)`` (never overflows), and the
    Taylor polynomial ``x (1 + x^2 (-1/3 + x^2 (2/15 - 17/315 x^2)))`` for ``|x| < 0.25``."""
    ax = abs_(x)
    e2 = exp_(ax * -2.0)
    big = (1.0 - e2) / (1.0 + e2)
    x2 = x * x
    small = x + x * x2 * (_TANH_TAYLOR[0] + x2 * (_TANH_TAYLOR[1] + x2 * _TANH_TAYLOR[2]))
    return where(ax < _TANH_SMALL, small, where(x < 0.0, -big, big))


def erf_formula(x, exp_, abs_, where):
    """``erf`` by Abramowitz & Stegun 7.1.26 from ``exp_``/``abs_``/``where`` (device functions,
    or numpy's to measure it on the host), and its Maclaurin series through ``x**11`` for
    ``|x| < 0.5`` (where 7.1.26's ``1 - ...`` cancels); odd in ``x``."""
    ax = abs_(x)
    t = 1.0 / (1.0 + _ERF_P * ax)
    poly = _ERF_A[4]
    for a in _ERF_A[3::-1]:
        poly = a + t * poly
    y = 1.0 - t * poly * exp_(-(ax * ax))
    x2 = x * x
    series = _ERF_TAYLOR[5]
    for c in _ERF_TAYLOR[4::-1]:
        series = c + x2 * series
    return where(ax < _ERF_SMALL, x * series, where(x < 0.0, -y, y))


def _float32_formula(x, name: str, formula) -> Value:
    """``formula`` (one of the ``*_formula`` functions) on device ``x`` in Float32; Float64 refused."""
    v, original = float_operand(x, name)
    if v.dtype is dt.Float64:
        raise CompilationError(f"tsjit.math.{name} is not available for Float64 (its formula is Float32-"
                               f"accurate); convert to Float32 if its precision is enough")
    return cast_to(formula(v, exp, abs, select), original)


def tanh(x) -> Value:
    """Hyperbolic tangent, Float32 (Float16/BFloat16 through Float32; Float64 is refused).

    An accurate formulation, not PTX ``tanh.approx.f32`` (PTX ISA, Floating Point Instructions:
    tanh; its relative error is about 2**-11): ``sign(x) (1 - e) / (1 + e)``, ``e = exp(-2|x|)``, and an odd Taylor
    polynomial through ``x**7`` for ``|x| < 0.25``.  Error: at most 1e-6 relative over all finite
    Float32 inputs with an exact ``exp`` (measured on a dense grid: about 3e-7); the device's
    ``ex2.approx`` (2 ulp) adds at most 2.5e-7 absolute.  Saturates to +-1; NaN gives NaN.

    Raises:
        CompilationError: ``x`` is not a float, or is Float64.
    """
    return _float32_formula(x, "tanh", tanh_formula)


def erf(x) -> Value:
    """The error function, Float32 (Float16/BFloat16 through Float32; Float64 is refused).

    libdevice is not available, so this is Abramowitz & Stegun 7.1.26 for ``|x| >= 0.5`` (a
    degree-5 polynomial in ``t = 1 / (1 + 0.3275911 |x|)`` times ``exp(-x^2)``; absolute error
    1.5e-7 in exact arithmetic) and the Maclaurin series through ``x**11`` below 0.5 (truncation
    error < 2e-8 relative).  Error in Float32 with an exact ``exp``: at most 5e-7 absolute, and
    1e-6 relative for ``|x| < 0.5`` (measured on dense grids of [-6, 6] and [1e-30, 0.5]); the
    device's ``ex2.approx`` (2 ulp) adds at most 2.5e-7 absolute.  Saturates to +-1.

    Raises:
        CompilationError: ``x`` is not a float, or is Float64.
    """
    return _float32_formula(x, "erf", erf_formula)


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


def available() -> list[str]:
    """The public functions and constants (``pi``, ``e``, ``inf``) of ``tsjit.math``, sorted."""
    return sorted(name for name, obj in globals().items()
                  if not name.startswith("_") and not name.isupper() and (callable(obj) or isinstance(obj, float))
                  and getattr(obj, "__module__", __name__) == __name__ and name not in _INTERNAL)


_INTERNAL = {"tanh_formula", "erf_formula", "available", "annotations"}

#: the public builtins (what ``dir(tsjit.math)``, ``help`` and ``from tsjit.math import *`` show); the
#: helpers above (``available``, the ``*_formula`` functions the tests check) stay importable
__all__ = available()


def __dir__() -> list[str]:
    return list(__all__)


def __getattr__(name: str):
    """A missing name: an AttributeError listing what exists, the closest match first."""
    if name.startswith("__"):
        raise AttributeError(name)
    names = available()
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    ordered = close + [n for n in names if n not in close]
    exc = AttributeError(f"module 'tsjit.math' has no attribute {name!r}; it has: {', '.join(ordered)}")
    exc.hint = f"tsjit.math has: {', '.join(ordered)}"
    raise exc
