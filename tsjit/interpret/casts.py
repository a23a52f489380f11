"""LLVM cast instructions with PTX's conversion semantics (PTX ISA §9.7.9.21 ``cvt``).

``fptosi``/``fptoui`` truncate toward zero (tsjit emits them only where the value is known in range,
or the saturating ``llvm.fpto*i.sat`` intrinsics); int -> float and float narrowing round to
nearest even; address-space casts translate between the interpreter's address encodings
(:mod:`tsjit.interpret.memory`).
"""
from __future__ import annotations

import math

from tsjit.errors import InterpretError
from tsjit.interpret import memory as M
from tsjit.interpret import scalars as S

__all__ = ["cast_function", "float_to_int"]


def float_to_int(x, width: int, signed: bool) -> int:
    """Truncate ``x`` toward zero and saturate to the integer range; NaN gives 0 (``cvt.rzi``)."""
    x = float(x)
    if x != x:
        return 0
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    if math.isinf(x):
        v = hi if x > 0 else lo
    else:
        v = max(lo, min(hi, int(x)))
    return v & ((1 << width) - 1)


def _scalar_cast(op: str, src, dst, tr, instr):
    sk, dk = S.kind_of(src), S.kind_of(dst)
    if op == "trunc":
        mask = S.mask_of(dst)
        return lambda x: x & mask
    if op == "zext":
        return lambda x: int(x)
    if op == "sext":
        width, mask = src.width, S.mask_of(dst)
        sign = 1 << (width - 1)
        return lambda x: ((int(x) ^ sign) - sign) & mask
    if op in ("fptrunc", "fpext"):
        if sk == "float" and dk == "bfloat":
            return S.bfloat_of_float
        if dk == "float":
            return S.F32
        if dk == "double":
            return float
        return lambda x: S.round_float(float(x), dk)
    if op in ("fptosi", "fptoui"):
        width, signed = dst.width, op == "fptosi"
        return lambda x: float_to_int(x, width, signed)
    if op in ("sitofp", "uitofp"):
        sign = 1 << (src.width - 1)
        signed = op == "sitofp"
        if dk == "float":
            # an exact int -> float32: Python's int -> float rounds to double first; go through
            # exact rational rounding only when the int does not fit 53 bits
            def to_f32(x, signed=signed):
                v = (x ^ sign) - sign if signed else x
                return S.F32(v) if abs(v) < (1 << 53) else S.F32(float(v))
            return to_f32
        if dk == "double":
            return (lambda x: float((x ^ sign) - sign)) if signed else (lambda x: float(x))
        return (lambda x: S.round_float(float((x ^ sign) - sign), dk)) if signed else \
            (lambda x: S.round_float(float(x), dk))
    if op == "bitcast":
        if sk == dk and sk not in ("vector",):
            return None
        return _bitcast(src, dst)
    if op in ("ptrtoint", "inttoptr"):
        mask = S.mask_of(dst) if dk == "int" else (1 << 64) - 1
        return lambda x: x & mask
    if op == "addrspacecast":
        return _address_cast(src.addrspace, dst.addrspace, tr, instr)
    raise InterpretError(f"the interpreter does not know the cast `{op}` ({tr.where(instr)})")


def _pieces(t):
    """[(kind, bits)] of the scalars of ``t`` from the lowest address."""
    if S.kind_of(t) == "vector":
        return _pieces(t.element) * t.count
    kind = S.kind_of(t)
    return [(kind, S.type_size(t) * 8 if kind != "int" else t.width)]


def _bitcast(src, dst):
    src_parts, dst_parts = _pieces(src), _pieces(dst)
    src_vector, dst_vector = S.kind_of(src) == "vector", S.kind_of(dst) == "vector"
    if src_parts == [("bfloat", 16)] * 2 and dst_parts == [("int", 32)]:     # packing a bf16x2 register
        bits = S.bfloat_bits
        return lambda v: bits(v[0]) | (bits(v[1]) << 16)
    if src_parts == [("int", 32)] and dst_parts == [("bfloat", 16)] * 2:
        value = S.bfloat_of_bits
        return lambda x: (value(x), value(x >> 16))

    def to_bits(value):
        items = value if src_vector else (value,)
        total, shift = 0, 0
        for (kind, bits), item in zip(src_parts, items):
            raw = item if kind in ("int", "ptr") else S.float_bits(item, kind)
            total |= (int(raw) & ((1 << bits) - 1)) << shift
            shift += bits
        return total

    def from_bits(total):
        items, shift = [], 0
        for kind, bits in dst_parts:
            raw = (total >> shift) & ((1 << bits) - 1)
            items.append(raw if kind in ("int", "ptr") else S.bits_float(raw, kind))
            shift += bits
        return tuple(items) if dst_vector else items[0]

    return lambda value: from_bits(to_bits(value))


def _address_cast(src_space: int, dst_space: int, tr, instr):
    """Between shared::cta (3), shared::cluster (7), generic (0), global (1) and param/local spaces."""
    if src_space == dst_space:
        return None
    if src_space == 3 and dst_space == 0:
        return _thread_cast(lambda th, x: M.GENERIC_SHARED | ((th.cta.rank + 1) << M.CLUSTER_SHIFT) | x)
    if src_space == 3 and dst_space == 7:
        return _thread_cast(lambda th, x: ((th.cta.rank + 1) << M.CLUSTER_SHIFT) | x)
    if src_space in (0, 7) and dst_space == 3:
        return lambda x: x & M.OFFSET_MASK
    if src_space == 0 and dst_space == 7:
        return lambda x: x & ((1 << 32) - 1)
    if src_space == 7 and dst_space == 0:
        return lambda x: M.GENERIC_SHARED | x
    # global <-> generic, param/local/const <-> generic: the same address
    return None


def _thread_cast(fn):
    fn.needs_thread = True
    return fn


def cast_function(tr, instr):
    """A function ``value -> value`` for cast ``instr``, or None when the value is unchanged.  A
    function with ``needs_thread`` takes ``(thread, value)``."""
    op = instr.opname
    src, dst = instr.operands[0].type, instr.type
    if S.kind_of(src) == "vector" and S.kind_of(dst) == "vector" and op != "bitcast":
        scalar = _scalar_cast(op, src.element, dst.element, tr, instr)
        if scalar is None:
            return None
        if src.count == 2:              # the packed pairs of 16-bit math (bf16x2, f16x2)
            return lambda v: (scalar(v[0]), scalar(v[1]))
        return lambda v: tuple(scalar(x) for x in v)
    return _scalar_cast(op, src, dst, tr, instr)
