"""The interpreter's LLVM binary operators (``add`` ... ``frem``), for :mod:`tsjit.interpret.translate`.

:data:`BINARY`: opcode -> ``factory(scalar type, where) -> fn(x, y)`` on the interpreter's scalars
(:mod:`tsjit.interpret.scalars`: integers as unsigned Python ints masked to their width, Float32 rounded
through ``F32``); integer division by zero raises :class:`~tsjit.errors.InterpretError` naming ``where``.
:func:`binary_source`: the same operation as one Python statement over the register list ``f`` (for the
common opcodes), which :func:`tsjit.interpret.translate.fuse` inlines.  Semantics: LLVM Language Reference,
"Binary Operations" / "Bitwise Binary Operations" (``shl`` / ``lshr`` by the width or more give 0 here,
``ashr`` the sign fill).
"""
from __future__ import annotations

import math
import operator

from tsjit.errors import InterpretError
from tsjit.interpret import scalars as S
from tsjit.interpret.scalars import F32

_PY_OPS = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "^",
           "fadd": "+", "fsub": "-", "fmul": "*"}


def binary_source(opname, t, d, a, b, divisor=None):
    """``f[d] = f[a] <opname> f[b]`` for scalar type ``t`` as one Python statement (``divisor``: the second
    operand's constant value, or None), or None where the opcode / type has no inline form."""
    kind = S.kind_of(t)
    if kind == "int":
        mask = S.mask_of(t)
        sign = 1 << (t.width - 1)
        if divisor and opname in ("udiv", "urem"):
            return f"f[{d}] = f[{a}] {'//' if opname == 'udiv' else '%'} {divisor}"
        if divisor and divisor < sign and opname in ("sdiv", "srem"):   # a positive constant divisor
            x = f"_x{d}"
            if opname == "sdiv":
                return f"{x} = (f[{a}] ^ {sign}) - {sign}; f[{d}] = ({x} // {divisor} if {x} >= 0 else -(-{x} // {divisor})) & {mask}"
            return f"{x} = (f[{a}] ^ {sign}) - {sign}; f[{d}] = ({x} % {divisor} if {x} >= 0 else -(-{x} % {divisor})) & {mask}"
        if opname in ("add", "sub", "mul"):
            return f"f[{d}] = (f[{a}] {_PY_OPS[opname]} f[{b}]) & {mask}"
        if opname in ("and", "or", "xor"):
            return f"f[{d}] = f[{a}] {_PY_OPS[opname]} f[{b}]"
        if opname == "shl":
            return f"f[{d}] = (f[{a}] << f[{b}]) & {mask} if f[{b}] < {t.width} else 0"
        if opname == "lshr":
            return f"f[{d}] = f[{a}] >> f[{b}] if f[{b}] < {t.width} else 0"
        if opname == "ashr":
            sign = 1 << (t.width - 1)
            return f"f[{d}] = (((f[{a}] ^ {sign}) - {sign}) >> min(f[{b}], {t.width - 1})) & {mask}"
        return None
    if kind == "float" and opname in ("fadd", "fsub", "fmul"):
        return f"f[{d}] = F32(f[{a}] {_PY_OPS[opname]} f[{b}])"
    return None


def _int_op(python_op):
    def factory(t, where):
        mask = S.mask_of(t)
        return lambda x, y: python_op(x, y) & mask
    return factory


def _shift(kind):
    def factory(t, where):
        width, mask = t.width, S.mask_of(t)
        sign = 1 << (width - 1)
        if kind == "shl":
            return lambda x, y: (x << y) & mask if y < width else 0
        if kind == "lshr":
            return lambda x, y: x >> y if y < width else 0
        return lambda x, y: (((x ^ sign) - sign) >> min(y, width - 1)) & mask
    return factory


def _division(kind):
    def factory(t, where):
        width, mask = t.width, S.mask_of(t)
        sign = 1 << (width - 1)

        def check(y):
            if y == 0:
                raise InterpretError(f"integer division by zero ({kind}) at {where}")

        if kind == "udiv":
            def fn(x, y):
                check(y)
                return x // y
        elif kind == "urem":
            def fn(x, y):
                check(y)
                return x % y
        elif kind == "sdiv":
            def fn(x, y):
                check(y)
                sx, sy = (x ^ sign) - sign, (y ^ sign) - sign
                q = abs(sx) // abs(sy)
                return (q if (sx < 0) == (sy < 0) else -q) & mask
        else:
            def fn(x, y):
                check(y)
                sx, sy = (x ^ sign) - sign, (y ^ sign) - sign
                r = abs(sx) % abs(sy)
                return (r if sx >= 0 else -r) & mask
        return fn
    return factory


def _float_op(python_op):
    def factory(t, where):
        kind = S.kind_of(t)
        if kind == "float":
            return lambda x, y: F32(python_op(float(x), float(y)))
        if kind == "double":
            return lambda x, y: python_op(x, y)
        return lambda x, y: S.round_float(python_op(float(x), float(y)), kind)
    return factory


def _fdiv(x, y):
    try:
        return x / y
    except ZeroDivisionError:
        if x != x or x == 0:
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)


def _frem(x, y):
    try:
        return math.fmod(x, y)
    except ValueError:
        return math.nan


BINARY = {
    "add": _int_op(operator.add), "sub": _int_op(operator.sub), "mul": _int_op(operator.mul),
    "and": _int_op(operator.and_), "or": _int_op(operator.or_), "xor": _int_op(operator.xor),
    "shl": _shift("shl"), "lshr": _shift("lshr"), "ashr": _shift("ashr"),
    "udiv": _division("udiv"), "sdiv": _division("sdiv"), "urem": _division("urem"), "srem": _division("srem"),
    "fadd": _float_op(operator.add), "fsub": _float_op(operator.sub), "fmul": _float_op(operator.mul),
    "fdiv": _float_op(_fdiv), "frem": _float_op(_frem),
}
